# kube/: fragment owned by the kube module (see kube/README.md).
