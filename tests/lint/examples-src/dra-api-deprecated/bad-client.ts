// @kubernetes/client-node: the v1beta1 API class.
import * as k8s from "@kubernetes/client-node";

const kc = new k8s.KubeConfig();
kc.loadFromDefault();
export const api = kc.makeApiClient(k8s.ResourceV1beta1Api); // expect
