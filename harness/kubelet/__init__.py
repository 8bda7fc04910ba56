"""The hollow DRA kubelet: upstream's kubelet code on the node side, beside draguard's fake node agent.

``draguard-kubelet`` (the Go sources in this folder) is the kubemark hollow kubelet of the pinned
``k8s.io/kubernetes`` release with the real DRA manager and a CDI-enforcing fake container runtime.
:class:`~draguard.harness.kubelet.process.HollowKubelet` runs one per node as a supervised child.
"""

from .process import AGENT_CAPABILITIES, HollowKubelet, find_kubelet

__all__ = ["HollowKubelet", "find_kubelet", "AGENT_CAPABILITIES"]
