import { DAEMON_PATHS, checkBirdConfig, checkFrrConfig } from "./daemonCheck.ts";

const bird = (name: string) => `router id 10.0.0.1;
protocol device {}
protocol bgp ${name} {
  local as 65000;
  neighbor 10.0.0.2 internal;
  ipv4;
}
`;

const frr = (lines: string[]) =>
  [
    "router bgp 65000",
    " neighbor rrs peer-group",
    ...lines,
    " neighbor 10.0.0.2 peer-group rrs",
    "exit",
    "",
  ].join("\n");

describe("checkBirdConfig", () => {
  it("accepts a valid config and rejects a keyword used as a protocol name", () => {
    expect(checkBirdConfig(bird("upstream_1"))).toEqual({ accepted: true, output: "" });
    const rejected = checkBirdConfig(bird("router"));
    expect(rejected.accepted).toBe(false);
    expect(rejected.output).toMatch(/syntax error/);
  });

  it("says how to install bird when it is missing", () => {
    expect(() => checkBirdConfig(bird("x"), "/nonexistent/bird")).toThrow(
      "bird not installed: run scripts/bootstrap.sh",
    );
  });
});

describe("checkFrrConfig", () => {
  it("accepts a valid config", () => {
    expect(checkFrrConfig(frr([" neighbor rrs remote-as 65000"]))).toMatchObject({ accepted: true });
  });

  it("rejects a command FRR 8.4 does not know (vtysh pass)", () => {
    const rejected = checkFrrConfig(
      frr([" neighbor rrs remote-as 65000", " neighbor rrs addpath-rx-paths-limit 4"]),
    );
    expect(rejected.accepted).toBe(false);
    expect(rejected.output).toMatch(/^vtysh --dryrun: .*Unknown command/s);
  });

  it("rejects a well-formed command that fails when run (bgpd pass)", () => {
    // Valid syntax, but a peer-group member needs the group's remote-as first.
    const rejected = checkFrrConfig(frr([]).replace(" neighbor rrs peer-group\n", ""));
    expect(rejected.accepted).toBe(false);
    expect(rejected.output).toMatch(/^bgpd --dryrun: .*Config Failed/s);
  });

  it("says how to install frr when it is missing", () => {
    expect(() => checkFrrConfig(frr([]), { ...DAEMON_PATHS, vtysh: "/nonexistent/vtysh" })).toThrow(
      "frr not installed: run scripts/bootstrap.sh",
    );
  });
});
