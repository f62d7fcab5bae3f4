// Package charttest tests the Helm chart in charts/rbook (docs/helm.md): every documented
// values file in charts/rbook/examples renders with `helm template` into objects that decode
// strictly into the Kubernetes API types, and the rendering refuses the values rbook serve
// could not run with. The tests need helm on PATH (.ci/chart builds the version pinned in
// tools/go.mod) and skip without it.
package charttest
