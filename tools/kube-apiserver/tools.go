//go:build tools

// Package kubeapiserver pins the two programs scripts/test-setup.d/kubernetes.sh builds for the
// integration tests: kube-apiserver from the k8s.io/kubernetes module, and the etcd server of the
// release that module was tested with. go.mod pins every k8s.io staging module to the matching
// v0.x release (k8s.io/kubernetes itself refers to them by local paths).
package kubeapiserver

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
