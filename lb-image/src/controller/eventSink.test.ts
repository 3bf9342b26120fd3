// The Events the sink creates: what `kubectl describe` needs to show them, and repeat suppression.
import type { CoreV1Api, CoreV1Event } from "@kubernetes/client-node";
import { pino } from "pino";
import { EventSink } from "./eventSink.ts";

function sink() {
  const created: CoreV1Event[] = [];
  const api = {
    createNamespacedEvent: ({ body }: { body: CoreV1Event }) => Promise.resolve(void created.push(body)),
  } as unknown as CoreV1Api;
  return { events: new EventSink(api, pino({ level: "silent" })), created };
}

describe("EventSink", () => {
  it("sends Warnings and Normal Events with the object's kind, apiVersion and uid", async () => {
    const { events, created } = sink();
    await events.report([
      { object: "shop/web", kind: "Service", uid: "u-1", reason: "VipInUse", message: "m1" },
      { object: "shop/web-abc", kind: "EndpointSlice", uid: "u-2", reason: "InvalidPort", message: "m2" },
    ]);
    await events.report(
      [{ object: "lb/lb-0", kind: "Pod", uid: "u-3", reason: "VipAllocated", message: "m3" }],
      "Normal",
    );
    expect(
      created.map((e) => ({ type: e.type, reason: e.reason, involvedObject: e.involvedObject })),
    ).toEqual([
      {
        type: "Warning",
        reason: "VipInUse",
        involvedObject: { kind: "Service", apiVersion: "v1", namespace: "shop", name: "web", uid: "u-1" },
      },
      {
        type: "Warning",
        reason: "InvalidPort",
        involvedObject: {
          kind: "EndpointSlice",
          apiVersion: "discovery.k8s.io/v1",
          namespace: "shop",
          name: "web-abc",
          uid: "u-2",
        },
      },
      {
        type: "Normal",
        reason: "VipAllocated",
        involvedObject: { kind: "Pod", apiVersion: "v1", namespace: "lb", name: "lb-0", uid: "u-3" },
      },
    ]);
    expect(created[0]!.metadata).toEqual({ generateName: "web.", namespace: "shop" });
  });

  it("sends a repeat only after ten minutes, but at once for a new object of the same name", async () => {
    const { events, created } = sink();
    const item = {
      object: "shop/web",
      kind: "Service" as const,
      uid: "u-1",
      reason: "VipInUse",
      message: "m",
    };
    const now = jest.spyOn(Date, "now").mockReturnValue(1_000_000);
    try {
      await events.report([item]);
      await events.report([item]);
      await events.report([{ ...item, uid: "u-2" }]); // deleted and created again
      now.mockReturnValue(1_000_000 + 10 * 60_000 + 1);
      await events.report([item]);
    } finally {
      now.mockRestore();
    }
    expect(created.map((e) => e.involvedObject.uid)).toEqual(["u-1", "u-2", "u-1"]);
  });

  it("sends a change of state asked to be repeated each time, and forgets each Event on time after it", async () => {
    const { events, created } = sink();
    const item = (reason: string) => ({
      object: "shop/web",
      kind: "Service" as const,
      uid: "u-1",
      reason,
      message: reason,
    });
    const at = (minutes: number) => 1_000_000 + minutes * 60_000;
    const now = jest.spyOn(Date, "now").mockReturnValue(at(0));
    try {
      await events.report([item("AnnounceDisabled")], "Normal", { repeat: true });
      now.mockReturnValue(at(1));
      await events.report([item("AnnounceEnabled")], "Normal", { repeat: true });
      now.mockReturnValue(at(5));
      await events.report([item("AnnounceDisabled")], "Normal", { repeat: true });
      // Ten minutes after each one's last send: the Enabled one is sent, the Disabled one not yet.
      now.mockReturnValue(at(11.5));
      await events.report([item("AnnounceEnabled"), item("AnnounceDisabled")], "Normal");
    } finally {
      now.mockRestore();
    }
    expect(created.map((e) => e.reason)).toEqual([
      "AnnounceDisabled",
      "AnnounceEnabled",
      "AnnounceDisabled",
      "AnnounceEnabled",
    ]);
  });
});
