// A cdk8s ApiObject with a removed version.
import { ApiObject } from "cdk8s";

export function template(scope: any) {
  return new ApiObject(scope, "gpus", {
    apiVersion: "resource.k8s.io/v1alpha3", // expect
    kind: "ResourceClaimTemplate",
    metadata: { name: "four-gpus" },
  });
}
