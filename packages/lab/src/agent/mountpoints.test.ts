import { mountPointsOf, mountpointChain, pathOfRegistryName, registryName } from "./mountpoints.ts";

describe("mountpoints", () => {
  it("lists each path of the chain to a mountpoint, the last one a file for file mounts", () => {
    expect(mountpointChain("/var/run/secrets", false)).toEqual([
      { path: "/var", file: false },
      { path: "/var/run", file: false },
      { path: "/var/run/secrets", file: false },
    ]);
    expect(mountpointChain("/dev//termination-log", true)).toEqual([
      { path: "/dev", file: false },
      { path: "/dev/termination-log", file: true },
    ]);
  });

  it("names registry entries reversibly", () => {
    for (const p of ["/run/flannel", "/a%2Fb/c", "/x y"]) {
      expect(registryName(p)).not.toContain("/");
      expect(pathOfRegistryName(registryName(p))).toBe(p);
    }
  });

  it("reads mount points from mountinfo, undoing its escapes", () => {
    const info = [
      "36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue",
      "40 36 0:5 / /run/with\\040space rw - tmpfs tmpfs rw",
      "",
    ].join("\n");
    expect(mountPointsOf(info)).toEqual(["/mnt/parent", "/run/with space"]);
  });
});
