import { finalizerWork, releasedNote } from "./cleanupFinalizer.ts";
import { CLASS, lbService } from "./testing/k8sObjects.ts";

const FINALIZER = "service.kubernetes.io/load-balancer-cleanup";
const served = { loadBalancerClass: CLASS, serveClassless: false };
const names = (w: ReturnType<typeof finalizerWork>) => ({
  claim: w.claim.map((s) => s.metadata!.name),
  release: w.release.map((s) => s.metadata!.name),
});
const withFinalizer = (name: string, more: object = {}) => {
  const svc = lbService(name, { vips: ["10.1.1.1"] });
  return { ...svc, metadata: { ...svc.metadata, finalizers: [FINALIZER], ...more } };
};

describe("finalizerWork", () => {
  it("claims the Services served without it, releases those with it no longer served, leaves the rest", () => {
    const clusterIp = withFinalizer("was-lb");
    const otherClass = lbService("other", { class: "example.com/lb" });
    const work = finalizerWork(
      [
        lbService("new"),
        withFinalizer("served"),
        withFinalizer("deleting", { deletionTimestamp: new Date() }),
        { ...clusterIp, spec: { ...clusterIp.spec, type: "ClusterIP" } },
        otherClass,
        {
          ...otherClass,
          metadata: { ...otherClass.metadata, name: "other-finalized", finalizers: [FINALIZER] },
        },
      ],
      served,
    );
    // A Service of another class that holds the finalizer was ours before its class changed (the
    // API server forbids that change, but a restore may bring one back): released all the same.
    expect(names(work)).toEqual({ claim: ["new"], release: ["deleting", "was-lb", "other-finalized"] });
  });

  it("tells why an address was released", () => {
    expect(releasedNote(withFinalizer("gone", { deletionTimestamp: new Date() })).message).toMatch(
      /^VIP 10\.1\.1\.1 released \(the Service is being deleted\)/,
    );
    const svc = withFinalizer("np");
    expect(releasedNote({ ...svc, spec: { ...svc.spec, type: "NodePort" } }).message).toMatch(
      /^VIP 10\.1\.1\.1 released \(the Service is no longer one portable-lb serves \(type NodePort, class /,
    );
  });
});
