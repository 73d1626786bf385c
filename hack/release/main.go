// Command release builds pool-scheduler's release artifacts without a container engine: the
// multi-platform OCI image (layout) and its SBOMs, and pushes an image layout to a registry.
// The Makefile runs it (make image, make release); it is not shipped.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pool-scheduler/pool-scheduler/internal/ociimage"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	cmds := map[string]func([]string) error{
		"image": imageCmd,
		"push":  pushCmd,
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
  push        push an image layout (index, tag and SBOM referrers) to a registry`)
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
	dir := fs.String("layout", "_output/image", "OCI image layout written by `release image`")
	repo := fs.String("repository", "", "repository to push to, e.g. ghcr.io/pool-scheduler/pool-scheduler (credentials: docker login)")
	_ = fs.Parse(args)
	if *repo == "" {
		return fmt.Errorf("--repository is required")
	}
	l, err := ociimage.ReadLayout(*dir)
	if err != nil {
		return err
	}
	ref, err := ociimage.Push(l, *repo)
	if err != nil {
		return err
	}
	fmt.Printf("pushed %s:%s (%s)\n", *repo, l.Tag, ref)
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
