// @kubernetes/client-node: the GA API class and models.
import * as k8s from "@kubernetes/client-node";

const kc = new k8s.KubeConfig();
kc.loadFromDefault();
export const api = kc.makeApiClient(k8s.ResourceV1Api);
export const claim: k8s.V1ResourceClaim = { apiVersion: "resource.k8s.io/v1", kind: "ResourceClaim", spec: {} };
