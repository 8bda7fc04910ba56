package main

// The container manager: kubemark's stub (pkg/kubelet/cm/container_manager_stub.go) for everything
// but DRA, and the real DRA manager (pkg/kubelet/cm/dra/manager.go) wired as
// pkg/kubelet/cm/container_manager_linux.go wires it in containerManagerImpl, method by method.

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clientset "k8s.io/client-go/kubernetes"
	internalapi "k8s.io/cri-api/pkg/apis"
	"k8s.io/klog/v2"
	pluginwatcherapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
	"k8s.io/kubernetes/pkg/kubelet/cm/resourceupdates"
	"k8s.io/kubernetes/pkg/kubelet/config"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager/cache"
	"k8s.io/kubernetes/pkg/kubelet/status"
)

type draContainerManager struct {
	cm.ContainerManager
	dra *dra.Manager
}

var _ cm.ContainerManager = &draContainerManager{}

// newDRAContainerManager mirrors NewContainerManager's "Initialize DRA manager" step: the manager
// keeps its checkpoint (dra_manager_state) in the kubelet root directory.
func newDRAContainerManager(logger klog.Logger, client clientset.Interface, rootDir string) (*draContainerManager, error) {
	m, err := dra.NewManager(logger, client, rootDir)
	if err != nil {
		return nil, err
	}
	return &draContainerManager{ContainerManager: cm.NewStubContainerManager(), dra: m}, nil
}

// Start mirrors containerManagerImpl.Start: the DRA manager starts first, with the kubelet's
// active-pods and get-node functions and its sources-ready signal.
func (c *draContainerManager) Start(ctx context.Context, node *v1.Node, activePods cm.ActivePodsFunc, getNode cm.GetNodeFunc,
	sourcesReady config.SourcesReady, podStatusProvider status.PodStatusProvider, runtimeService internalapi.RuntimeService,
	localStorageCapacityIsolation bool) error {
	if err := c.dra.Start(ctx, dra.ActivePodsFunc(activePods), dra.GetNodeFunc(getNode), sourcesReady); err != nil {
		return err
	}
	return c.ContainerManager.Start(ctx, node, activePods, getNode, sourcesReady, podStatusProvider, runtimeService, localStorageCapacityIsolation)
}

// GetPluginRegistrationHandlers mirrors containerManagerImpl's: the plugin manager hands DRA
// registrations (plugins_registry/*.sock of type DRAPlugin) to the DRA manager.
func (c *draContainerManager) GetPluginRegistrationHandlers() map[string]cache.PluginHandler {
	handlers := c.ContainerManager.GetPluginRegistrationHandlers()
	if handlers == nil {
		handlers = map[string]cache.PluginHandler{}
	}
	handlers[pluginwatcherapi.DRAPlugin] = c.dra.GetWatcherHandler()
	return handlers
}

// GetResources mirrors containerManagerImpl's: the CDI device IDs of the container's prepared claims.
func (c *draContainerManager) GetResources(ctx context.Context, pod *v1.Pod, container *v1.Container) (*kubecontainer.RunContainerOptions, error) {
	opts, err := c.ContainerManager.GetResources(ctx, pod, container)
	if err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &kubecontainer.RunContainerOptions{}
	}
	info, err := c.dra.GetResources(pod, container)
	if err != nil {
		return nil, err
	}
	opts.CDIDevices = append(opts.CDIDevices, info.CDIDevices...)
	return opts, nil
}

// GetDynamicResources mirrors containerManagerImpl's: what the pod-resources API reports.
func (c *draContainerManager) GetDynamicResources(logger klog.Logger, pod *v1.Pod, container *v1.Container) []*podresourcesapi.DynamicResource {
	infos, err := c.dra.GetContainerClaimInfos(pod, container)
	if err != nil {
		logger.Error(err, "Unable to get container claim info state")
		return []*podresourcesapi.DynamicResource{}
	}
	var out []*podresourcesapi.DynamicResource
	for _, info := range infos {
		var resources []*podresourcesapi.ClaimResource
		for driverName, driverState := range info.DriverState {
			for _, device := range driverState.Devices {
				var cdiDevices []*podresourcesapi.CDIDevice
				for _, id := range device.CDIDeviceIDs {
					cdiDevices = append(cdiDevices, &podresourcesapi.CDIDevice{Name: id})
				}
				resources = append(resources, &podresourcesapi.ClaimResource{
					CdiDevices: cdiDevices, DriverName: driverName, PoolName: device.PoolName,
					DeviceName: device.DeviceName, ShareId: (*string)(device.ShareID),
				})
			}
		}
		out = append(out, &podresourcesapi.DynamicResource{
			ClaimName: info.ClaimName, ClaimNamespace: info.Namespace, ClaimResources: resources,
		})
	}
	return out
}

// PrepareDynamicResources, UnprepareDynamicResources and PodMightNeedToUnprepareResources are plain
// delegations, as in containerManagerImpl.
func (c *draContainerManager) PrepareDynamicResources(ctx context.Context, pod *v1.Pod) error {
	return c.dra.PrepareResources(ctx, pod)
}

func (c *draContainerManager) UnprepareDynamicResources(ctx context.Context, pod *v1.Pod) error {
	return c.dra.UnprepareResources(ctx, pod)
}

func (c *draContainerManager) PodMightNeedToUnprepareResources(uid types.UID) bool {
	return c.dra.PodMightNeedToUnprepareResources(uid)
}

// UpdateAllocatedResourcesStatus mirrors containerManagerImpl's DRA half: device health from the
// plugins' health streams goes into containerStatuses[].allocatedResourcesStatus. Like upstream,
// it needs the ResourceHealthStatus gate (beta, on by default in 1.37).
func (c *draContainerManager) UpdateAllocatedResourcesStatus(logger klog.Logger, pod *v1.Pod, podStatus *v1.PodStatus) {
	c.ContainerManager.UpdateAllocatedResourcesStatus(logger, pod, podStatus)
	if resourceHealthStatusEnabled() {
		c.dra.UpdateAllocatedResourcesStatus(logger, pod, podStatus)
	}
}

// Updates mirrors containerManagerImpl's: the DRA manager's health updates make the kubelet resync
// the affected pods. Upstream fans in the device manager too; the stub has none.
func (c *draContainerManager) Updates() <-chan resourceupdates.Update {
	if resourceHealthStatusEnabled() {
		return c.dra.Updates()
	}
	return c.ContainerManager.Updates()
}
