import { finalizerWork, releasedNote } from "./cleanupFinalizer.ts";
import { CLASS, lbService } from "./testing/k8sObjects.ts";

const FINALIZER = "service.kubernetes.io/load-balancer-cleanup";
const served = { loadBalancerClass: CLASS, serveClassless: false };
const names = (w: ReturnType<typeof finalizerWork>) => ({
  claim: w.claim.map((s) => s.metadata!.name),
  release: w.release.map((s) => s.metadata!.name),
});
const OWNER = "portable-lb.io/cleanup-finalizer-owner";
const withFinalizer = (name: string, more: object = {}, owner = CLASS) => {
  const svc = lbService(name, { vips: ["10.1.1.1"] });
  return {
    ...svc,
    metadata: { ...svc.metadata, finalizers: [FINALIZER], annotations: { [OWNER]: owner }, ...more },
  };
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
        // Another controller's finalizer (the name is every cloud's): never ours to remove, even
        // once its Service is being deleted or has no class any more.
        {
          ...otherClass,
          metadata: { ...otherClass.metadata, name: "other-finalized", finalizers: [FINALIZER] },
        },
        withFinalizer("cloud-deleting", { deletionTimestamp: new Date() }, "example.com/lb"),
        { ...withFinalizer("no-owner"), metadata: { name: "no-owner", finalizers: [FINALIZER] } },
      ],
      served,
    );
    // One of ours holding a finalizer no owner annotation claims gets ours (with the annotation).
    expect(names(work)).toEqual({ claim: ["new", "no-owner"], release: ["deleting", "was-lb"] });
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
