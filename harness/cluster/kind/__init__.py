"""The kind backend: real nodes (kubelet, containerd, runc) in containers, built and run offline.

- :mod:`.components`: kind, containerd, CNI plugins, crictl, the node's Kubernetes binaries, built from Go modules;
- :mod:`.nodefiles`, :mod:`.oci`, :mod:`.image`: the node image, assembled offline and cached by versions;
- :mod:`.quirks`: what this host lacks and how each lack is worked around (one place);
- :mod:`.hostlog`: host changes journaled before they are made, undone when the cluster goes;
- :mod:`.engine`: an existing docker/podman, or a private dockerd;
- :mod:`.cluster`: ``kind create``/``delete`` with the quirks applied, image loading, the kubeconfig.
"""
