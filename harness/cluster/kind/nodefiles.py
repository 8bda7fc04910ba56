"""The files draguard writes into its offline kind node image: entrypoint, systemd units, containerd and
CNI configuration.

They play the part of kind's ``images/base/files`` (kubernetes-sigs/kind, ``images/base``): kind's
``create`` expects a node image whose init is systemd, whose entrypoint logs ``detected cgroup v1``
(or systemd's ``Reached target Multi-User System``) once it may exec into it
(``pkg/cluster/internal/providers/common/cgroups.go``), whose kubelet unit reads the flags kubeadm writes,
and whose ``/kind/version`` names the Kubernetes version. The content here is draguard's own.

:func:`node_files` maps each absolute path in the node to ``(mode, text)``; :mod:`.image` writes them.
"""

from __future__ import annotations

__all__ = ["node_files", "SANDBOX_IMAGE", "CNI_SUBNET", "cri_base_spec"]

import json
from typing import Any

SANDBOX_IMAGE = "registry.k8s.io/pause:3.10.2"
"""kubeadm v1.37's pause tag (``cmd/kubeadm/app/constants``: PauseVersion); the CRI plugin's sandbox image."""

CNI_SUBNET = "10.244.0.0/16"
"""kind's default pod subnet; the static bridge network hands out addresses from it on every node."""

_ENTRYPOINT = r"""#!/bin/bash
# draguard kind node entrypoint: prepares mounts and cgroups for systemd and the kubelet inside a
# privileged container, then execs init (the container's command).
set -o errexit -o nounset -o pipefail

say() { echo "draguard-node: $*" >&2; }

# Mounts: /sys read-only for everything below us; / shared so that kubelet and containerd mounts propagate.
mount -o remount,ro /sys || say "could not remount /sys read-only"
mount --make-rshared /

if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
  say "detected cgroup v2"
else
  # The phrase below is what kind waits for before it execs into the node on a cgroup v1 host.
  say "detected cgroup v1"
  mount --make-rprivate /sys/fs/cgroup
  # Give the kubelet's cgroup roots their own mount points in every v1 hierarchy of this cgroupns.
  for hierarchy in $(findmnt -lun -t cgroup -o target); do
    for root in kubelet kubelet.slice; do
      mkdir -p "$hierarchy/$root"
      if [[ "$hierarchy" == */cpuset ]]; then
        cat "$hierarchy/cpuset.cpus" > "$hierarchy/$root/cpuset.cpus"
        cat "$hierarchy/cpuset.mems" > "$hierarchy/$root/cpuset.mems"
      fi
      mount --bind "$hierarchy/$root" "$hierarchy/$root"
    done
  done
fi

# A machine id and product uuid of this node's own (image layers are shared by every node).
rm -f /etc/machine-id
systemd-machine-id-setup >/dev/null
[[ -f /kind/product_uuid ]] || cat /proc/sys/kernel/random/uuid > /kind/product_uuid
for f in /sys/class/dmi/id/product_uuid /sys/devices/virtual/dmi/id/product_uuid; do
  [[ -f "$f" ]] && mount -o ro,bind /kind/product_uuid "$f"
done

# iptables: follow whichever backend the container engine already used in this network namespace.
legacy=$( (iptables-legacy-save; ip6tables-legacy-save) 2>/dev/null | grep -c '^-' || true)
nft=$( (timeout 5 iptables-nft-save; timeout 5 ip6tables-nft-save) 2>/dev/null | grep -c '^-' || true)
mode=nft
[[ "$legacy" -gt "$nft" ]] && mode=legacy
say "iptables backend: $mode"
update-alternatives --set iptables "/usr/sbin/iptables-$mode" >/dev/null
update-alternatives --set ip6tables "/usr/sbin/ip6tables-$mode" >/dev/null

# DNS: docker's embedded server answers at 127.0.0.11 inside this network namespace only (its DNAT rules
# hang off OUTPUT). Pods, CoreDNS among them, cannot use a loopback address, so the node names its default
# gateway instead and the same rules also catch traffic arriving for it (PREROUTING; route_localnet lets
# that traffic be sent to 127.0.0.11).
gateway=$(ip -4 route show default | awk '{print $3; exit}')
if [[ -n "$gateway" ]] && grep -q '^nameserver 127\.0\.0\.11' /etc/resolv.conf; then
  sysctl -qw net.ipv4.conf.all.route_localnet=1
  iptables-save -t nat \
    | sed -e "s/-d 127\.0\.0\.11/-d $gateway/g" \
          -e 's/^-A OUTPUT \(.*\) -j DOCKER_OUTPUT$/&\n-A PREROUTING \1 -j DOCKER_OUTPUT/' \
          -e "s/--to-source :53/--to-source $gateway:53/g" \
    | iptables-restore || say "could not point pods' DNS at $gateway"
  resolv=$(sed "s/^nameserver 127\.0\.0\.11/nameserver $gateway/" /etc/resolv.conf)
  echo "$resolv" > /etc/resolv.conf  # in place: the engine bind-mounts this file
  say "DNS for pods: $gateway"
fi

say "starting $*"
exec "$@"
"""

_CONTAINERD_SERVICE = """[Unit]
Description=containerd (the node's container runtime)
After=network.target local-fs.target
StartLimitIntervalSec=0

[Service]
ExecStartPre=-/sbin/modprobe overlay
ExecStart=/usr/local/bin/containerd
Type=notify
Delegate=yes
KillMode=process
Restart=always
RestartSec=1
LimitNPROC=infinity
LimitCORE=infinity
LimitNOFILE=infinity
TasksMax=infinity

[Install]
WantedBy=multi-user.target
"""

_KUBELET_SERVICE = """[Unit]
Description=kubelet (the node agent)
ConditionPathExists=/var/lib/kubelet/config.yaml

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=1s
CPUAccounting=true
MemoryAccounting=true
Slice=kubelet.slice
KillMode=process

[Install]
WantedBy=multi-user.target
"""

# kubeadm writes /var/lib/kubelet/config.yaml and kubeadm-flags.env; this is the usual drop-in that reads them.
_KUBELET_KUBEADM = """[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
"""

# On cgroup v1 the kubelet's own cgroup must exist in the systemd hierarchy before it starts.
_KUBELET_CGROUP = """[Service]
ExecStartPre=/bin/sh -c "[ -f /sys/fs/cgroup/cgroup.controllers ] || mkdir -p /sys/fs/cgroup/systemd/kubelet"
"""

_KUBELET_SLICE = """[Unit]
Description=kubelet and its pods
Before=slices.target

[Slice]
MemoryAccounting=true
CPUAccounting=true
"""

_CONTAINERD_CONFIG = f"""# draguard kind node: containerd's CRI plugin (config version 2, which kind's containerdConfigPatches extend)
version = 2

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{SANDBOX_IMAGE}"
  tolerate_missing_hugepages_controller = true
  restrict_oom_score_adj = false

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
  discard_unpacked_layers = true

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
  base_runtime_spec = "/etc/containerd/cri-base.json"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = true

[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/opt/cni/bin"
  conf_dir = "/etc/cni/net.d"
"""

_CNI_CONFLIST = {
    "cniVersion": "1.0.0",
    "name": "draguard-bridge",
    "plugins": [
        {"type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": True, "hairpinMode": True,
         "ipam": {"type": "host-local", "ranges": [[{"subnet": CNI_SUBNET}]], "routes": [{"dst": "0.0.0.0/0"}]}},
        {"type": "portmap", "capabilities": {"portMappings": True}},
    ],
}


def cri_base_spec(default_spec: dict[str, Any]) -> dict[str, Any]:
    """The CRI runtime's base OCI spec from ``ctr oci spec``'s default: without its rlimits, so that a
    pod's limits are the node's (the node may not raise them)."""
    spec: dict[str, Any] = json.loads(json.dumps(default_spec))
    spec.get("process", {}).pop("rlimits", None)
    return spec


def node_files(kubernetes_version: str) -> dict[str, tuple[int, str]]:
    return {
        "/usr/local/bin/entrypoint": (0o755, _ENTRYPOINT),
        "/etc/systemd/system/containerd.service": (0o644, _CONTAINERD_SERVICE),
        "/etc/systemd/system/kubelet.service": (0o644, _KUBELET_SERVICE),
        "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf": (0o644, _KUBELET_KUBEADM),
        "/etc/systemd/system/kubelet.service.d/11-cgroup-v1.conf": (0o644, _KUBELET_CGROUP),
        "/etc/systemd/system/kubelet.slice": (0o644, _KUBELET_SLICE),
        "/etc/default/kubelet": (0o644, "KUBELET_EXTRA_ARGS=--runtime-cgroups=/system.slice/containerd.service\n"),
        "/etc/containerd/config.toml": (0o644, _CONTAINERD_CONFIG),
        "/etc/crictl.yaml": (0o644, "runtime-endpoint: unix:///run/containerd/containerd.sock\n"),
        "/etc/sysctl.d/10-draguard-node.conf": (
            0o644, "net.ipv4.conf.all.route_localnet=1\nnet.ipv4.conf.all.arp_ignore=0\n"
                   "net.ipv4.conf.default.rp_filter=1\nnet.ipv4.conf.all.rp_filter=1\n"),
        "/etc/cni/net.d/10-draguard-bridge.conflist": (0o644, json.dumps(_CNI_CONFLIST, indent=2) + "\n"),
        "/kind/version": (0o644, kubernetes_version + "\n"),
    }
