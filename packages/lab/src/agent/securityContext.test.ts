import type { V1Container, V1Pod } from "@kubernetes/client-node";
import { ALL_CAPABILITIES, DEFAULT_CAPABILITIES, processSecurity, setprivArgs } from "./securityContext.ts";

const pod = (spec: Partial<NonNullable<V1Pod["spec"]>> = {}): V1Pod => ({
  spec: { containers: [], ...spec },
});
const container = (securityContext: V1Container["securityContext"] = {}): V1Container => ({
  name: "c",
  securityContext,
});

describe("processSecurity", () => {
  it("runs as root with containerd's default capabilities when nothing is set", () => {
    const s = processSecurity(pod(), container());
    expect(s).toMatchObject({
      uid: 0,
      gid: 0,
      groups: [],
      privileged: false,
      noNewPrivs: false,
      readOnlyRootFilesystem: false,
    });
    expect(s.capabilities).toEqual([...DEFAULT_CAPABILITIES].sort());
  });

  it("gives an LB container exactly what it adds after dropping ALL", () => {
    const s = processSecurity(
      pod(),
      container({
        runAsUser: 0,
        privileged: false,
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ["ALL"], add: ["NET_ADMIN", "CAP_NET_BIND_SERVICE"] },
      }),
    );
    expect(s.capabilities).toEqual(["NET_ADMIN", "NET_BIND_SERVICE"]);
    expect(s.noNewPrivs).toBe(true);
    expect(s.readOnlyRootFilesystem).toBe(true);
    expect(setprivArgs(s)).toEqual([
      "--reuid",
      "0",
      "--regid",
      "0",
      "--clear-groups",
      "--bounding-set",
      "-all,+net_admin,+net_bind_service",
      "--inh-caps",
      "-all",
      "--ambient-caps",
      "-all",
      "--no-new-privs",
    ]);
  });

  it("takes the container's user over the pod's, with supplemental groups and fsGroup", () => {
    const s = processSecurity(
      pod({
        securityContext: {
          runAsUser: 1000,
          runAsGroup: 3000,
          supplementalGroups: [4000, 3000],
          fsGroup: 2000,
        },
      }),
      container({ runAsUser: 1001, capabilities: { drop: ["NET_RAW"] } }),
    );
    expect(s).toMatchObject({ uid: 1001, gid: 3000, groups: [2000, 4000] });
    expect(s.capabilities).not.toContain("NET_RAW");
    expect(setprivArgs(s).slice(0, 6)).toEqual([
      "--reuid",
      "1001",
      "--regid",
      "3000",
      "--groups",
      "2000,4000",
    ]);
  });

  it("gives a privileged container every capability and no bounding set", () => {
    const s = processSecurity(pod(), container({ privileged: true, capabilities: { drop: ["ALL"] } }));
    expect(s.capabilities).toEqual([...ALL_CAPABILITIES].sort());
    expect(setprivArgs(s)).not.toContain("--bounding-set");
  });

  it("refuses runAsNonRoot without a user, and unknown capabilities", () => {
    expect(() => processSecurity(pod({ securityContext: { runAsNonRoot: true } }), container())).toThrow(
      /runAsNonRoot/,
    );
    expect(() => processSecurity(pod(), container({ capabilities: { add: ["FLY"] } }))).toThrow(
      /unknown capability "FLY"/,
    );
  });
});
