//go:build tools

// Package k8sbins only records which upstream main packages draguard builds, so that
// `go mod tidy` keeps their dependencies in go.sum. The binaries are built with
// `go build <upstream main package>` by draguard.harness.cluster.binaries. The last three are what
// draguard-kubelet (harness/kubelet, staged as ./kubelet at build time) needs beyond them.
package k8sbins

import (
	_ "go.etcd.io/etcd/server/v3/etcdmain"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "k8s.io/kubernetes/test/e2e/dra/test-driver/app"

	_ "k8s.io/cri-client/pkg/fake"
	_ "k8s.io/kubernetes/pkg/kubemark"
	_ "tags.cncf.io/container-device-interface/pkg/cdi"
)
