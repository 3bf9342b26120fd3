import { checkSysctls, hostVethName, podNetnsName } from "./podNetwork.ts";

describe("pod network names", () => {
  it("names a pod's namespace and veth from its UID, the veth within 15 characters", () => {
    const uid = "0b4a6f6e-1c2d-4e5f-8a9b-0c1d2e3f4a5b";
    expect(podNetnsName(uid)).toBe(`plb-pod-${uid}`);
    expect(hostVethName(uid)).toMatch(/^veth[0-9a-f]{8}$/);
    expect(hostVethName(uid)).toBe(hostVethName(uid));
    expect(hostVethName(uid)).not.toBe(hostVethName(`${uid}x`));
  });

  it("allows only network sysctls (namespaced by the pod's network namespace)", () => {
    expect(checkSysctls([{ name: "net.ipv4.ip_forward", value: "1" }])).toBeUndefined();
    expect(checkSysctls([{ name: "kernel.shm_rmid_forced", value: "1" }])).toMatch(
      /kernel.shm_rmid_forced .*net\.\* only/,
    );
  });
});
