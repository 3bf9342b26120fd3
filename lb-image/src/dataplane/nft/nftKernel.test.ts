// The nftables engine against the real kernel, in a network namespace of its own: what a
// transaction applies is what reading the table back gives (with no drift: the strict reader knows
// exactly what nft prints for the engine's own table), and a second transaction is empty.
import { execFileSync } from "node:child_process";
import fc from "fast-check";
import { arbitraryState } from "../testing/arbitraries.ts";
import { parseNftText } from "./nftParse.ts";
import { skeleton, transaction } from "./nftRuleset.ts";
import { NFT_TABLE, toNft } from "./nftState.ts";

const NS = `plb-nft-${process.pid}`;
const nft = (args: string[], input?: string): string =>
  execFileSync("ip", ["netns", "exec", NS, "nft", ...args], {
    input: input ?? "",
    encoding: "utf8",
    timeout: 10_000,
  });
/** The services read back; the strict reader must find the table exactly as the engine makes it. */
const readBack = () => {
  const { services, drift } = parseNftText(
    nft(["-a", "-n", "-s", "list", "table", "ip", NFT_TABLE]),
  ).result();
  expect(drift).toEqual([]);
  return services;
};

beforeAll(() => execFileSync("ip", ["netns", "add", NS]));
afterAll(() => execFileSync("ip", ["netns", "delete", NS]));

describe("nftables engine on the kernel", () => {
  it("applying transaction(current, desired) gives desired; a second one is empty", () => {
    fc.assert(
      fc.property(arbitraryState, arbitraryState, (first, second) => {
        nft(["flush", "ruleset"]);
        nft(["-f", "-"], skeleton() + transaction([], toNft(first)));
        expect(readBack()).toEqual(toNft(first));
        nft(["-f", "-"], transaction(readBack(), toNft(second)));
        expect(readBack()).toEqual(toNft(second));
        expect(transaction(readBack(), toNft(second))).toBe("");
      }),
      { numRuns: 40 },
    );
  });

  it("checks the full ruleset with nft -c", () => {
    const desired = toNft([
      {
        vip: "10.1.1.10",
        port: 80,
        protocol: "tcp",
        scheduler: "mh",
        backends: [{ ip: "10.244.1.5", port: 8080, weight: 1 }],
      },
      {
        vip: "10.1.1.10",
        port: 53,
        protocol: "udp",
        scheduler: "mh",
        backends: [{ ip: "10.244.1.6", port: 53, weight: 0 }],
      },
    ]);
    nft(["flush", "ruleset"]);
    expect(() => nft(["-c", "-f", "-"], skeleton() + transaction([], desired))).not.toThrow();
    expect(() => nft(["-c", "-f", "-"], "add rule ip portable_lb nonsense\n")).toThrow();
  });
});
