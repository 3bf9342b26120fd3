// pulumi-python-sdkgen SCHEMA.json OUT_DIR writes the Python SDK of a Pulumi package from its schema
// (as `pulumi package get-schema` prints it) into OUT_DIR, with Pulumi's own Python code generator at
// the CLI's version: what `pulumi package gen-sdk --language python` does through the Python language
// host's GeneratePackage, which the only language host the Go module proxy serves (3.68.0) predates.
// The bootstrap builds it (scripts/bootstrap/python.sh); scripts/python-sdk.sh runs it.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/blang/semver"
	python "github.com/pulumi/pulumi/pkg/v3/codegen/python"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
)

// noOtherPackages is the generator's loader: the schemas it is for reference no other package.
type noOtherPackages struct{}

func (noOtherPackages) refuse(name string) error {
	return fmt.Errorf("the schema refers to package %q; pulumi-python-sdkgen loads no other package's schema, "+
		"so give the component outputs of plain types instead of %s resources", name, name)
}

func (l noOtherPackages) LoadPackage(pkg string, _ *semver.Version) (*schema.Package, error) {
	return nil, l.refuse(pkg)
}

func (l noOtherPackages) LoadPackageV2(_ context.Context, d *schema.PackageDescriptor) (*schema.Package, error) {
	return nil, l.refuse(d.Name)
}

func (l noOtherPackages) LoadPackageReference(pkg string, _ *semver.Version) (schema.PackageReference, error) {
	return nil, l.refuse(pkg)
}

func (l noOtherPackages) LoadPackageReferenceV2(
	_ context.Context, d *schema.PackageDescriptor,
) (schema.PackageReference, error) {
	return nil, l.refuse(d.Name)
}

func run(schemaPath, outDir string) error {
	data, err := os.ReadFile(schemaPath)
	if err != nil {
		return err
	}
	var spec schema.PackageSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("%s is not a package schema: %w", schemaPath, err)
	}
	// As the language host binds it.
	pkg, diags, err := schema.BindSpec(spec, noOtherPackages{}, schema.ValidationOptions{AllowDanglingReferences: true})
	if err != nil {
		return err
	}
	if diags.HasErrors() {
		return fmt.Errorf("%s: %w", schemaPath, diags)
	}
	files, err := python.GeneratePackage("pulumi-language-python", pkg, nil, noOtherPackages{})
	if err != nil {
		return err
	}
	for name, contents := range files {
		path := filepath.Join(outDir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, contents, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: pulumi-python-sdkgen SCHEMA.json OUT_DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-python-sdkgen: %v\n", err)
		os.Exit(1)
	}
}
