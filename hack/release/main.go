// Command release builds pool-scheduler's release artifacts without a container engine: the
// multi-platform OCI image (layout) and its SBOMs, and pushes an image layout to a registry.
// The Makefile runs it (make image, make release); it is not shipped.
package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/pool-scheduler/pool-scheduler/internal/ociimage"
	"github.com/pool-scheduler/pool-scheduler/internal/release"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	cmds := map[string]func([]string) error{
		"image":      imageCmd,
		"push":       pushCmd,
		"digest":     digestCmd,
		"push-chart": pushChartCmd,
		"dist":       distCmd,
		"lint-chart": lintChartCmd,
	}
	run, ok := cmds[os.Args[1]]
	if !ok {
		usage()
	}
	if err := run(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "release %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: release <command> [flags]   (-h after a command lists its flags)
  image       assemble the OCI image layout from per-platform binaries
  push        push image layouts (index, tag and SBOM referrers) to a registry
  digest      print an image layout's digest (its image index), as push pushes it
  push-chart  push a packaged chart to an OCI registry (helm push), for oci:// installs
  dist        make the release directory: image layout tar per line, chart, install YAML per line, plugin archives, krew manifest, SHA256SUMS
  lint-chart  lint a chart with the Helm SDK (helm lint --strict)`)
	os.Exit(2)
}

// platforms is a repeatable os/arch=dir flag.
type platforms map[string]string

func (p platforms) String() string { return fmt.Sprint(map[string]string(p)) }
func (p platforms) Set(v string) error {
	plat, dir, ok := strings.Cut(v, "=")
	if !ok || plat == "" || dir == "" {
		return fmt.Errorf("want os/arch=directory, got %q", v)
	}
	p[plat] = dir
	return nil
}

// lineLayouts is a repeatable <line>=<layout directory> flag: a release line's image layout.
type lineLayouts map[string]string

func (l lineLayouts) String() string { return fmt.Sprint(map[string]string(l)) }
func (l lineLayouts) Set(v string) error {
	line, dir, ok := strings.Cut(v, "=")
	if !ok || line == "" || dir == "" {
		return fmt.Errorf("want <line>=<image layout directory> (e.g. 1.36=_output/image/k8s-1.36), got %q", v)
	}
	if err := release.CheckLine(line); err != nil {
		return err
	}
	if _, dup := l[line]; dup {
		return fmt.Errorf("line %s given twice", line)
	}
	l[line] = dir
	return nil
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func imageCmd(args []string) error {
	fs := flag.NewFlagSet("image", flag.ExitOnError)
	o := ociimage.Options{Platforms: platforms{}}
	out := fs.String("out", "_output/image", "directory to write the OCI image layout to (replaced)")
	tag := fs.String("tag", "", "tag recorded in the layout (org.opencontainers.image.ref.name); default: --version")
	epoch := fs.String("source-date-epoch", "", "build time as Unix seconds (the commit's time keeps digests reproducible); default: now")
	fs.StringVar(&o.Version, "version", "", "release version the binaries carry")
	fs.StringVar(&o.Revision, "revision", "", "full commit the binaries were built from")
	fs.StringVar(&o.Source, "source", ociimage.DefaultSource, "source repository URL")
	fs.Var(platforms(o.Platforms), "platform", "os/arch=directory holding that platform's pool-scheduler and pool-labeler (repeatable)")
	_ = fs.Parse(args)
	created, err := epochTime(*epoch)
	if err != nil {
		return err
	}
	o.Created = created
	if *tag == "" {
		*tag = o.Version
	}
	start := time.Now()
	r, err := ociimage.Build(o)
	if err != nil {
		return err
	}
	if err := ociimage.WriteLayout(*out, r, *tag); err != nil {
		return err
	}
	d, err := r.Index.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s: image %s@%s, %d platform(s), %d SBOM(s), in %v\n", *out, *tag, d, len(o.Platforms), len(r.SBOMs), time.Since(start).Round(100*time.Millisecond))
	return nil
}

func pushCmd(args []string) error {
	fs := flag.NewFlagSet("push", flag.ExitOnError)
	var dirs stringList
	fs.Var(&dirs, "layout", "OCI image layout written by `release image` (repeatable: one per release line)")
	repo := fs.String("repository", "", "repository to push to, e.g. ghcr.io/pool-scheduler/pool-scheduler (credentials: docker login or helm registry login)")
	version := fs.String("version", "", "if set, each layout must be tagged <version>-k8s<line> (a release's layouts)")
	valuesOut := fs.String("values-out", "", "if set, write the chart's image values for what was pushed to this file (helm install -f <file>): image.repository and image.digests.<line>")
	_ = fs.Parse(args)
	if *repo == "" || len(dirs) == 0 {
		return fmt.Errorf("--repository and at least one --layout are required")
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (a flag's value with a space in it needs quotes)", fs.Args())
	}
	// Every layout is read and checked before anything is pushed, so a bad one does not leave
	// the registry with part of a release.
	var layouts []*ociimage.Layout
	for _, dir := range dirs {
		l, err := ociimage.ReadLayout(dir)
		if err != nil {
			return err
		}
		if *version != "" {
			if line, ok := strings.CutPrefix(l.Tag, *version+"-k8s"); !ok || release.CheckLineTag(l.Tag, *version, line) != nil {
				return fmt.Errorf("%s is tagged %q, not <version>-k8s<line> of the release %s", dir, l.Tag, *version)
			}
		}
		layouts = append(layouts, l)
	}
	digests := map[string]string{}
	for _, l := range layouts {
		line, err := layoutLine(l)
		if err != nil && *valuesOut != "" {
			return err
		}
		ref, err := ociimage.Push(l, *repo)
		if err != nil {
			return err
		}
		digests[line] = ref.DigestStr()
		fmt.Printf("pushed %s:%s (%s)\n", *repo, l.Tag, ref)
	}
	if *valuesOut == "" {
		return nil
	}
	values, err := yaml.Marshal(map[string]any{"image": map[string]any{"repository": *repo, "digests": digests}})
	if err != nil {
		return err
	}
	header := "# The chart's image values for the images `release push` pushed: helm install ... -f " + filepath.Base(*valuesOut) + "\n"
	if err := os.WriteFile(*valuesOut, append([]byte(header), values...), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s\n", *valuesOut)
	return nil
}

// layoutLine is the release line a layout's tag names (<version>-k8s<line>).
func layoutLine(l *ociimage.Layout) (string, error) {
	i := strings.LastIndex(l.Tag, "-k8s")
	line := l.Tag[i+len("-k8s"):]
	if i < 0 || release.CheckLine(line) != nil {
		return "", fmt.Errorf("the layout is tagged %q, not <version>-k8s<line>: no release line to name in the chart's values", l.Tag)
	}
	return line, nil
}

func pushChartCmd(args []string) error {
	fs := flag.NewFlagSet("push-chart", flag.ExitOnError)
	tgz := fs.String("chart", "", "the packaged chart (.tgz), e.g. a release's pool-scheduler-X.Y.Z.tgz")
	repo := fs.String("repository", "", "OCI repository the chart goes under, e.g. oci://ghcr.io/pool-scheduler/charts (credentials: helm registry login or docker login)")
	_ = fs.Parse(args)
	if *tgz == "" || *repo == "" || fs.NArg() > 0 {
		return fmt.Errorf("--chart and --repository are required, and nothing else")
	}
	ref, err := release.PushChart(*tgz, *repo, false)
	if err != nil {
		return err
	}
	fmt.Printf("pushed %s\n", ref)
	return nil
}

func digestCmd(args []string) error {
	fs := flag.NewFlagSet("digest", flag.ExitOnError)
	dir := fs.String("layout", "", "OCI image layout written by `release image`")
	_ = fs.Parse(args)
	if *dir == "" || fs.NArg() > 0 {
		return fmt.Errorf("one --layout is required, and nothing else")
	}
	l, err := ociimage.ReadLayout(*dir)
	if err != nil {
		return err
	}
	d, err := l.Index.Digest()
	if err != nil {
		return err
	}
	fmt.Println(d.String())
	return nil
}

func epochTime(epoch string) (time.Time, error) {
	if epoch == "" {
		return time.Now().UTC().Truncate(time.Second), nil
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("--source-date-epoch: %q is not Unix seconds", epoch)
	}
	return time.Unix(sec, 0).UTC(), nil
}

func distCmd(args []string) error {
	fs := flag.NewFlagSet("dist", flag.ExitOnError)
	version := fs.String("version", "", "the release, vX.Y.Z")
	repo := fs.String("repository", "ghcr.io/pool-scheduler/pool-scheduler", "image repository the release is pushed to")
	layouts := lineLayouts{}
	fs.Var(layouts, "line", "<line>=<OCI image layout> of a release line's image, tagged <version>-k8s<line> (make image; repeatable, one per line)")
	out := fs.String("out", "", "release directory to write (replaced)")
	root := fs.String("root", ".", "repository checkout")
	downloads := fs.String("download-url", ociimage.DefaultSource+"/releases/download", "where the release's files are published; the krew manifest points at <url>/<version>/<archive>")
	epoch := fs.String("source-date-epoch", "", "time stamped into archives (Unix seconds)")
	refOut := fs.String("image-ref-out", "", "also write each line's repository:tag@digest, one a line, to this file (outside --out)")
	plugins := platforms{}
	fs.Var(plugins, "plugin", "os/arch=path of a kubectl-pool binary (repeatable)")
	_ = fs.Parse(args)
	if *version == "" || len(layouts) == 0 || *out == "" {
		return fmt.Errorf("--version, --line (at least one) and --out are required")
	}
	created, err := epochTime(*epoch)
	if err != nil {
		return err
	}
	rel, err := release.ReadRelease(*repo, *version, layouts)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(*out); err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	var refs []string
	for _, line := range rel.Lines() {
		img := rel.Image(line)
		if err := release.TarDir(layouts[line], filepath.Join(*out, "pool-scheduler-image-"+img.Tag()+".oci.tar"), created); err != nil {
			return err
		}
		refs = append(refs, img.Ref())
	}
	chartFile, err := release.PackageChart(filepath.Join(*root, "manifests", "charts", "pool-scheduler"), *out, rel)
	if err != nil {
		return err
	}
	fmt.Printf("chart %s (images %s)\n", chartFile, strings.Join(refs, ", "))
	files, err := release.RenderRelease(*root, rel)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := os.WriteFile(filepath.Join(*out, name), files[name], 0o644); err != nil {
			return err
		}
		fmt.Println(name)
	}
	var archives []release.PluginPlatform
	names := make([]string, 0, len(plugins))
	for p := range plugins {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		goos, arch, _ := strings.Cut(p, "/")
		name := fmt.Sprintf("%s_%s_%s_%s.tar.gz", release.PluginBinary, *version, goos, arch)
		path := filepath.Join(*out, name)
		if err := release.PluginArchive(plugins[p], "LICENSE", path, created); err != nil {
			return fmt.Errorf("plugin %s: %w", p, err)
		}
		sum, err := release.FileSHA256(path)
		if err != nil {
			return err
		}
		archives = append(archives, release.PluginPlatform{OS: goos, Arch: arch, URI: *downloads + "/" + *version + "/" + name, SHA256: sum})
	}
	if len(archives) > 0 {
		manifest, err := release.KrewManifest(filepath.Join(*root, "manifests", "krew", "pool.yaml.tmpl"), *version, archives)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(*out, "pool.yaml"), manifest, 0o644); err != nil {
			return err
		}
		fmt.Printf("pool.yaml: krew manifest for %s\n", strings.Join(names, ", "))
	}
	if err := release.WriteChecksums(*out); err != nil {
		return err
	}
	if *refOut != "" {
		if err := os.WriteFile(*refOut, []byte(strings.Join(refs, "\n")+"\n"), 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("%s: release %s, images %s\n", *out, *version, strings.Join(refs, ", "))
	return nil
}

func lintChartCmd(args []string) error {
	fs := flag.NewFlagSet("lint-chart", flag.ExitOnError)
	chartDir := fs.String("chart", "manifests/charts/pool-scheduler", "chart directory")
	kube := fs.String("kube-version", "v1.34.10", "Kubernetes version to render against")
	ns := fs.String("namespace", "pool-scheduler", "release namespace")
	_ = fs.Parse(args)
	problems, info, err := release.LintChart(*chartDir, *ns, *kube, nil)
	if err != nil {
		return err
	}
	for _, m := range info {
		fmt.Println(m)
	}
	for _, m := range problems {
		fmt.Fprintln(os.Stderr, m)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s: %d finding(s) at warning level or above", *chartDir, len(problems))
	}
	fmt.Printf("%s: linted with the Helm SDK against Kubernetes %s, no warnings\n", *chartDir, *kube)
	return nil
}
