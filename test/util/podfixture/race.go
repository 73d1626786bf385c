//go:build race

package podfixture

const raceDivisor = 10
