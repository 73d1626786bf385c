// Package azurelb models how a cloud builds a LoadBalancer Service's backend pool: Azure's, as
// cloud-provider-azure does (Standard and Basic SKUs, exclusions, multiple Standard load
// balancers; sources in docs/azure.md), and elsewhere the pools pool-scheduler's provider-neutral
// annotation names. pkg/report turns it into findings; poolctl reads it from Azure's cloud config.
package azurelb
