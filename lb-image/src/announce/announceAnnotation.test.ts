import { lbService } from "../controller/testing/k8sObjects.ts";
import { NO_INTENT, announceChanges, announceIntent, sameHeldBack } from "./announceAnnotation.ts";

const announce = (value: string) => ({ annotations: { "portable-lb.io/announce": value } });

describe("announceIntent", () => {
  it('holds back every VIP of a Service whose announce is "false", and only those', () => {
    const intent = announceIntent([
      lbService("moving", { vips: ["10.1.1.1", "10.1.1.2"], uid: "u-m", ...announce("false") }),
      lbService("said", { vips: ["10.1.1.3"], ...announce("true") }),
      lbService("plain", { vips: ["10.1.1.4"] }),
      // Not allocated yet: nothing to hold back.
      lbService("new", announce("false")),
    ]);
    expect([...intent.heldBack]).toEqual([
      ["10.1.1.1", { object: "default/moving", uid: "u-m" }],
      ["10.1.1.2", { object: "default/moving", uid: "u-m" }],
    ]);
    expect([...intent.owners.keys()]).toEqual(["10.1.1.1", "10.1.1.2", "10.1.1.3", "10.1.1.4"]);
    expect(intent.problems).toEqual([]);
  });

  it.each(["False", "no", "0", "", " false"])(
    "takes %j as bad input: a Warning naming the annotation, the value and the fix, and the VIPs announced",
    (value) => {
      const intent = announceIntent([
        lbService("typo", { vips: ["10.1.1.1"], uid: "u-t", ...announce(value) }),
      ]);
      expect(intent.heldBack.size).toBe(0);
      expect(intent.problems).toEqual([
        {
          object: "default/typo",
          uid: "u-t",
          kind: "Service",
          reason: "InvalidAnnounce",
          message: `annotation portable-lb.io/announce must be "true" or "false" (got ${JSON.stringify(value)}); its VIPs are announced as without it. Set it to "false" to stop announcing them (the LB pods keep serving them), or remove it`,
        },
      ]);
    },
  );
});

describe("sameHeldBack", () => {
  it("compares the VIPs held back and their Services, nothing else", () => {
    const held = announceIntent([lbService("a", { vips: ["10.1.1.1"], uid: "u1", ...announce("false") })]);
    expect(
      sameHeldBack(
        held,
        announceIntent([
          lbService("a", { vips: ["10.1.1.1"], uid: "u1", ...announce("false") }),
          lbService("b", { vips: ["10.1.1.2"] }),
        ]),
      ),
    ).toBe(true);
    expect(sameHeldBack(held, NO_INTENT)).toBe(false);
    // The same VIP, now another (re-created) Service's.
    expect(
      sameHeldBack(
        held,
        announceIntent([lbService("a", { vips: ["10.1.1.1"], uid: "u2", ...announce("false") })]),
      ),
    ).toBe(false);
  });
});

describe("announceChanges", () => {
  const held = (uid = "u-w", vips = ["10.1.1.2", "10.1.1.1"]) =>
    announceIntent([lbService("web", { vips, uid, ...announce("false") })]);
  const released = (vips = ["10.1.1.1", "10.1.1.2"]) =>
    announceIntent([lbService("web", { vips, uid: "u-w" })]);

  it("tells one Normal Event per Service when its VIPs stop being announced, and when they are announced again", () => {
    expect(announceChanges(NO_INTENT, held(), "lb-1", "bgp")).toEqual([
      {
        object: "default/web",
        uid: "u-w",
        kind: "Service",
        reason: "AnnounceDisabled",
        message:
          'LB pod lb-1 is not announcing VIPs 10.1.1.1, 10.1.1.2 (annotation portable-lb.io/announce is "false"); it keeps serving the connections and packets that still reach it. Remove the annotation or set it to "true" to announce again',
      },
    ]);
    expect(announceChanges(held(), held(), "lb-1", "bgp")).toEqual([]);
    expect(announceChanges(held(), released(), "lb-1", "bgp")).toEqual([
      {
        object: "default/web",
        uid: "u-w",
        kind: "Service",
        reason: "AnnounceEnabled",
        message:
          'LB pod lb-1 announces VIPs 10.1.1.1, 10.1.1.2 again (annotation portable-lb.io/announce is no longer "false"), while the Service has a ready endpoint',
      },
    ]);
  });

  it("says routing in cloud-routes mode", () => {
    const [stopped] = announceChanges(NO_INTENT, held(), "lb-1", "cloud-routes");
    expect(stopped!.message).toMatch(/^LB pod lb-1 is not routing VIPs /);
    const [resumed] = announceChanges(held(), released(), "lb-1", "cloud-routes");
    expect(resumed!.message).toMatch(/^LB pod lb-1 routes VIPs 10\.1\.1\.1, 10\.1\.1\.2 again /);
  });

  it("tells nothing of a VIP that left its Service (released, or the Service deleted or re-created)", () => {
    expect(announceChanges(held(), NO_INTENT, "lb-1", "bgp")).toEqual([]);
    // One VIP released by the Service and one announced again: only the one it still has.
    expect(announceChanges(held(), released(["10.1.1.2"]), "lb-1", "bgp").map((e) => e.message)).toEqual([
      expect.stringContaining("announces VIP 10.1.1.2 again"),
    ]);
    // Deleted and created again without the annotation: a new Service, with nothing to resume.
    const recreated = announceIntent([lbService("web", { vips: ["10.1.1.1", "10.1.1.2"], uid: "u-new" })]);
    expect(announceChanges(held(), recreated, "lb-1", "bgp")).toEqual([]);
    // ...and one created again still annotated is held back anew.
    expect(announceChanges(held(), held("u-new"), "lb-1", "bgp").map((e) => [e.reason, e.uid])).toEqual([
      ["AnnounceDisabled", "u-new"],
    ]);
  });
});
