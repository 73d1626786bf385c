package ociimage

import (
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// SPDX 2.3 JSON, the subset an SBOM of Go binaries needs (spdx.github.io/spdx-spec/v2.3).
type SPDXDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      SPDXCreationInfo   `json:"creationInfo"`
	Packages          []SPDXPackage      `json:"packages"`
	Relationships     []SPDXRelationship `json:"relationships"`
}

type SPDXCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type SPDXPackage struct {
	SPDXID                string            `json:"SPDXID"`
	Name                  string            `json:"name"`
	VersionInfo           string            `json:"versionInfo,omitempty"`
	DownloadLocation      string            `json:"downloadLocation"`
	FilesAnalyzed         bool              `json:"filesAnalyzed"`
	Checksums             []SPDXChecksum    `json:"checksums,omitempty"`
	LicenseConcluded      string            `json:"licenseConcluded"`
	LicenseDeclared       string            `json:"licenseDeclared"`
	CopyrightText         string            `json:"copyrightText"`
	PrimaryPackagePurpose string            `json:"primaryPackagePurpose,omitempty"`
	ExternalRefs          []SPDXExternalRef `json:"externalRefs,omitempty"`
	Comment               string            `json:"comment,omitempty"`
}

type SPDXChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type SPDXExternalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type SPDXRelationship struct {
	SPDXElementID      string `json:"spdxElementId"`
	RelationshipType   string `json:"relationshipType"`
	RelatedSPDXElement string `json:"relatedSpdxElement"`
}

// SBOMOptions describe the binaries of one platform.
type SBOMOptions struct {
	Name, Version, Revision, Source string
	Created                         time.Time
	// Binaries are paths of Go binaries; their embedded build info (debug/buildinfo) lists the
	// Go toolchain and every module linked in, which is what the SBOM states.
	Binaries []string
}

const noAssertion = "NOASSERTION"

// SBOM describes Go binaries from their embedded build info: one package per binary (with its
// SHA-256), one per Go module linked into any of them (the version actually linked: a replace
// directive's target), and the Go standard library; each binary DEPENDS_ON what it links.
func SBOM(o SBOMOptions) (*SPDXDocument, error) {
	doc := &SPDXDocument{
		SPDXVersion: "SPDX-2.3",
		DataLicense: "CC0-1.0",
		SPDXID:      "SPDXRef-DOCUMENT",
		Name:        o.Name,
		CreationInfo: SPDXCreationInfo{
			Created:  o.Created.UTC().Format(time.RFC3339),
			Creators: []string{"Organization: pool-scheduler", "Tool: pool-scheduler-release-" + o.Version},
		},
	}
	modules := map[string]SPDXPackage{}
	hashes := sha256.New()
	for _, path := range o.Binaries {
		info, err := buildinfo.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: reading Go build info: %w", path, err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		hashes.Write(sum[:])
		addBinary(doc, modules, o, filepath.Base(path), sum[:], info)
	}
	ids := make([]string, 0, len(modules))
	for id := range modules {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		doc.Packages = append(doc.Packages, modules[id])
	}
	// Unique per content, as SPDX asks, and stable for the same binaries.
	doc.DocumentNamespace = fmt.Sprintf("%s/spdx/%s/%s-%s", strings.TrimSuffix(o.Source, "/"), o.Version, o.Name, hex.EncodeToString(hashes.Sum(nil))[:16])
	return doc, nil
}

// addBinary adds a binary's package, the modules it links (to modules) and its relationships.
func addBinary(doc *SPDXDocument, modules map[string]SPDXPackage, o SBOMOptions, name string, sum []byte, info *debug.BuildInfo) {
	id := spdxID("Binary", name)
	doc.Packages = append(doc.Packages, SPDXPackage{
		SPDXID:                id,
		Name:                  name,
		VersionInfo:           o.Version,
		DownloadLocation:      "git+" + o.Source + "@" + o.Revision,
		Checksums:             []SPDXChecksum{{Algorithm: "SHA256", ChecksumValue: hex.EncodeToString(sum)}},
		LicenseConcluded:      noAssertion,
		LicenseDeclared:       noAssertion,
		CopyrightText:         noAssertion,
		PrimaryPackagePurpose: "APPLICATION",
		ExternalRefs:          []SPDXExternalRef{purl(info.Main.Path, o.Version)},
		Comment:               fmt.Sprintf("Go program %s built with %s; build settings: %s", info.Path, info.GoVersion, settings(info)),
	})
	doc.Relationships = append(doc.Relationships, SPDXRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", id})
	std := stdlibPackage(info.GoVersion)
	modules[std.SPDXID] = std
	doc.Relationships = append(doc.Relationships, SPDXRelationship{id, "DEPENDS_ON", std.SPDXID})
	for _, dep := range info.Deps {
		pkg := modulePackage(dep)
		modules[pkg.SPDXID] = pkg
		doc.Relationships = append(doc.Relationships, SPDXRelationship{id, "DEPENDS_ON", pkg.SPDXID})
	}
}

// ModuleVersion is the path and version a module dependency is linked at: the target of a
// replace directive when there is one (k8s.io staging modules are required at v0.0.0 and
// replaced by their release).
func ModuleVersion(dep *debug.Module) (string, string) {
	if dep.Replace != nil {
		return dep.Replace.Path, dep.Replace.Version
	}
	return dep.Path, dep.Version
}

func modulePackage(dep *debug.Module) SPDXPackage {
	path, version := ModuleVersion(dep)
	p := SPDXPackage{
		SPDXID:                spdxID("Module", path+"-"+version),
		Name:                  path,
		VersionInfo:           version,
		DownloadLocation:      "https://proxy.golang.org/" + escapeModulePath(path) + "/@v/" + version + ".zip",
		LicenseConcluded:      noAssertion,
		LicenseDeclared:       noAssertion,
		CopyrightText:         noAssertion,
		PrimaryPackagePurpose: "LIBRARY",
		ExternalRefs:          []SPDXExternalRef{purl(path, version)},
	}
	sum := dep.Sum
	if dep.Replace != nil {
		sum = dep.Replace.Sum
		p.Comment = fmt.Sprintf("required as %s %s, replaced by %s %s", dep.Path, dep.Version, path, version)
	}
	if sum != "" {
		// go.sum's h1 hash is a SHA-256 over the module's file list, not over one file, so it
		// is not an SPDX checksum.
		p.Comment = strings.TrimPrefix(p.Comment+"; go.sum "+sum, "; ")
	}
	return p
}

func stdlibPackage(goVersion string) SPDXPackage {
	return SPDXPackage{
		SPDXID:                spdxID("Module", "stdlib-"+goVersion),
		Name:                  "stdlib",
		VersionInfo:           goVersion,
		DownloadLocation:      "https://go.dev/dl/",
		LicenseConcluded:      noAssertion,
		LicenseDeclared:       "BSD-3-Clause",
		CopyrightText:         noAssertion,
		PrimaryPackagePurpose: "LIBRARY",
		// The form vulnerability scanners look up (as syft writes it).
		ExternalRefs: []SPDXExternalRef{purl("stdlib", strings.TrimPrefix(goVersion, "go"))},
	}
}

func purl(path, version string) SPDXExternalRef {
	return SPDXExternalRef{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl", ReferenceLocator: "pkg:golang/" + path + "@" + version}
}

func settings(info *debug.BuildInfo) string {
	var s []string
	for _, kv := range info.Settings {
		s = append(s, kv.Key+"="+kv.Value)
	}
	return strings.Join(s, " ")
}

var nonID = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// spdxID makes an SPDX element ID: "SPDXRef-" then letters, digits, '.' and '-' only.
func spdxID(kind, name string) string {
	return "SPDXRef-" + kind + "-" + nonID.ReplaceAllString(name, "-")
}

// escapeModulePath is the module proxy's case encoding: an upper-case letter becomes '!' and
// its lower case.
func escapeModulePath(p string) string {
	var b strings.Builder
	for _, r := range p {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// checkStatic refuses binaries the scratch-based image cannot run: another OS or architecture,
// a dynamic loader (cgo), or no Go build info.
func checkStatic(path string, plat *v1.Platform) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: not an ELF binary: %w", path, err)
	}
	defer f.Close()
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "arm": elf.EM_ARM, "s390x": elf.EM_S390, "ppc64le": elf.EM_PPC64}[plat.Architecture]
	if want == 0 || f.Machine != want {
		return fmt.Errorf("%s: built for %s, not %s", path, f.Machine, plat.Architecture)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s: dynamically linked (needs a loader); build with CGO_ENABLED=0 (make binaries)", path)
		}
	}
	if _, err := buildinfo.ReadFile(path); err != nil {
		return fmt.Errorf("%s: no Go build info: %w", path, err)
	}
	return nil
}

// MarshalSBOM is the SBOM's file content.
func MarshalSBOM(doc *SPDXDocument) ([]byte, error) {
	return json.MarshalIndent(doc, "", "  ")
}

var validID = regexp.MustCompile(`^SPDXRef-[A-Za-z0-9.-]+$`)
