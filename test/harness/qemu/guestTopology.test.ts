// The guest topology's address plan and script shape (the integration test runs it for real).
import { GUEST_PATHS } from "./guestPaths.ts";
import { backendPage, guestTopology, TOPOLOGY_EXIT_CODE } from "./guestTopology.ts";

describe("guestTopology", () => {
  it("names one namespace and address per backend, each page naming its backend", () => {
    const topo = guestTopology({ backends: 3 });
    expect(topo.namespaces).toEqual({ client: "client", lb: "lb", backends: ["b1", "b2", "b3"] });
    expect(topo.backendIps).toEqual(["10.2.1.2", "10.2.2.2", "10.2.3.2"]);
    expect(topo.port).toBe(80);
    for (const ip of topo.backendIps) expect(topo.script).toContain(backendPage(ip));
  });

  it("makes the VIP local to the lb, routes replies through it, and uses iproute2 by path", () => {
    const { script, vip } = guestTopology({ backends: 2, port: 8080 });
    expect(script).toContain(`${GUEST_PATHS.ip} -n lb route add local ${vip}/32 dev lo`);
    expect(script).toContain(`${GUEST_PATHS.ip} -n b2 route add default via 10.2.2.1`);
    expect(script).toContain("httpd -p 8080 -h /srv/b2");
    expect(script).not.toMatch(/^ip /m);
  });

  it("exits the script with its own code when a step fails, quoting the step safely", () => {
    const line = guestTopology({ backends: 1 })
      .script.split("\n")
      .find((l) => l.includes("index.html"));
    expect(line).toContain(`exit ${TOPOLOGY_EXIT_CODE}`);
    expect(line).toContain(`'"'"'`);
  });

  it.each([0, 251, 1.5])("refuses %p backends", (backends) => {
    expect(() => guestTopology({ backends })).toThrow(/backends must be an integer from 1 to 250/);
  });
});
