import type { V1Pod } from "@kubernetes/client-node";
import {
  apiTime,
  desiredStatus,
  normalizeTime,
  podPhase,
  statusDiffers,
  type ContainerView,
  type PodView,
} from "./podStatus.ts";

const NOW = "2026-01-02T03:04:05Z";
const running = (name: string, ready = true): ContainerView => ({
  name,
  image: "img",
  state: { kind: "running", startedAt: "2026-01-02T03:00:00Z" },
  restartCount: 0,
  ready,
  started: true,
});
const done = (name: string, exitCode: number): ContainerView => ({
  name,
  image: "img",
  state: { kind: "terminated", exitCode, reason: exitCode ? "Error" : "Completed", finishedAt: NOW },
  restartCount: 0,
  ready: false,
  started: false,
});
const waiting = (name: string, reason = "ContainerCreating"): ContainerView => ({
  name,
  image: "img",
  state: { kind: "waiting", reason },
  restartCount: 0,
  ready: false,
  started: false,
});
const view = (o: Partial<PodView>): PodView => ({
  sandboxReady: true,
  podIP: "10.244.1.5",
  hostIP: "192.168.100.11",
  startTime: "2026-01-02T03:00:00Z",
  initContainers: [],
  containers: [],
  ...o,
});

describe("podPhase", () => {
  it("follows the kubelet's getPhase", () => {
    expect(podPhase("Always", view({ containers: [waiting("a")] }))).toBe("Pending");
    expect(podPhase("Always", view({ containers: [running("a"), waiting("b")] }))).toBe("Pending");
    expect(podPhase("Always", view({ containers: [running("a"), done("b", 0)] }))).toBe("Running");
    expect(podPhase("Always", view({ containers: [done("a", 1)] }))).toBe("Running");
    expect(podPhase("OnFailure", view({ containers: [done("a", 0), done("b", 0)] }))).toBe("Succeeded");
    expect(podPhase("OnFailure", view({ containers: [done("a", 1)] }))).toBe("Running");
    expect(podPhase("Never", view({ containers: [done("a", 0), done("b", 2)] }))).toBe("Failed");
    // Waiting in back-off after a run counts as stopped, not as never started.
    const backingOff = {
      ...waiting("a", "CrashLoopBackOff"),
      lastTerminated: { exitCode: 1, reason: "Error", finishedAt: NOW },
    };
    expect(podPhase("Always", view({ containers: [backingOff] }))).toBe("Running");
  });

  it("is Pending while init containers run, Failed when one fails with restartPolicy Never", () => {
    expect(podPhase("Always", view({ initContainers: [running("init")], containers: [waiting("a")] }))).toBe(
      "Pending",
    );
    expect(podPhase("Always", view({ initContainers: [done("init", 1)], containers: [waiting("a")] }))).toBe(
      "Pending",
    );
    expect(podPhase("Never", view({ initContainers: [done("init", 1)], containers: [waiting("a")] }))).toBe(
      "Failed",
    );
    expect(podPhase("Never", view({ initContainers: [done("init", 0)], containers: [running("a")] }))).toBe(
      "Running",
    );
  });

  it("ends a pod that will run nothing more, whatever its restart policy, and fails a rejected one", () => {
    expect(podPhase("Always", view({ final: true, containers: [done("a", 0)] }))).toBe("Succeeded");
    expect(podPhase("Always", view({ final: true, containers: [done("a", 143)] }))).toBe("Failed");
    expect(podPhase("Always", view({ rejected: { reason: "UnsupportedPodSpec", message: "x" } }))).toBe(
      "Failed",
    );
  });
});

describe("desiredStatus", () => {
  const pod: V1Pod = {
    metadata: { name: "p", namespace: "n", uid: "u" },
    spec: {
      containers: [{ name: "a" }, { name: "b" }],
      readinessGates: [{ conditionType: "example.com/lb" }],
    },
    status: {
      phase: "Pending",
      qosClass: "BestEffort",
      conditions: [
        { type: "PodScheduled", status: "True", lastTransitionTime: new Date("2026-01-01T00:00:00Z") },
        { type: "example.com/lb", status: "True", lastTransitionTime: new Date("2026-01-01T00:00:00Z") },
        { type: "ContainersReady", status: "False", lastTransitionTime: new Date("2026-01-01T00:00:01Z") },
      ],
    },
  };

  it("reports conditions, keeping other writers' ones and unchanged transition times", () => {
    const s = desiredStatus(pod, view({ containers: [running("a", true), running("b", false)] }), NOW);
    expect(s.phase).toBe("Running");
    const cond = (t: string) => s.conditions.find((c) => c.type === t)!;
    expect(cond("PodScheduled")).toMatchObject({
      status: "True",
      lastTransitionTime: "2026-01-01T00:00:00Z",
    });
    expect(cond("example.com/lb")).toMatchObject({ status: "True" });
    expect(cond("PodReadyToStartContainers")).toMatchObject({ status: "True", lastTransitionTime: NOW });
    expect(cond("Initialized")).toMatchObject({ status: "True" });
    expect(cond("ContainersReady")).toMatchObject({
      status: "False",
      reason: "ContainersNotReady",
      message: "containers with unready status: [b]",
      lastTransitionTime: "2026-01-01T00:00:01Z",
    });
    expect(cond("Ready")).toMatchObject({ status: "False", reason: "ContainersNotReady" });
    expect(s.podIP).toBe("10.244.1.5");
    expect(s.podIPs).toEqual([{ ip: "10.244.1.5" }]);
    expect(s.hostIPs).toEqual([{ ip: "192.168.100.11" }]);
    expect(s.containerStatuses[0]).toMatchObject({
      name: "a",
      ready: true,
      started: true,
      restartCount: 0,
      state: { running: { startedAt: "2026-01-02T03:00:00Z" } },
    });
  });

  it("is Ready only with every container ready and every readiness gate True", () => {
    const ready = desiredStatus(pod, view({ containers: [running("a"), running("b")] }), NOW);
    expect(ready.conditions.find((c) => c.type === "Ready")).toMatchObject({ status: "True" });
    const gateDown = {
      ...pod,
      status: {
        ...pod.status,
        conditions: pod.status!.conditions!.filter((c) => c.type !== "example.com/lb"),
      },
    };
    const notYet = desiredStatus(gateDown, view({ containers: [running("a"), running("b")] }), NOW);
    expect(notYet.conditions.find((c) => c.type === "Ready")).toMatchObject({
      status: "False",
      reason: "ReadinessGatesNotReady",
    });
  });

  it("shows the last termination of a restarted container", () => {
    const c = {
      ...running("a"),
      restartCount: 1,
      lastTerminated: { exitCode: 137, reason: "Error", finishedAt: NOW },
    };
    const s = desiredStatus(pod, view({ containers: [c, running("b")] }), NOW);
    expect(s.containerStatuses[0]).toMatchObject({
      restartCount: 1,
      lastState: { terminated: { exitCode: 137, reason: "Error" } },
    });
  });
});

describe("statusDiffers", () => {
  it("ignores what the API does to a status: sub-second times, dropped empty lists, null fields", () => {
    const pod: V1Pod = { metadata: { name: "p" }, spec: { containers: [{ name: "a" }] } };
    const s = desiredStatus(pod, view({ containers: [running("a")] }), NOW);
    // As it comes back from the API: times with milliseconds (JSON of a Date), empty lists dropped.
    const stored = JSON.parse(
      JSON.stringify({
        ...s,
        initContainerStatuses: undefined,
        reason: undefined,
        message: undefined,
      }).replace(/(\d\d:\d\d:\d\d)Z/g, "$1.000Z"),
    );
    expect(statusDiffers(stored, s)).toBe(false);
    expect(statusDiffers({ ...stored, phase: "Pending" }, s)).toBe(true);
    expect(statusDiffers(undefined, s)).toBe(true);
  });

  it("formats times as the API stores them", () => {
    expect(apiTime(Date.UTC(2026, 0, 2, 3, 4, 5, 678))).toBe("2026-01-02T03:04:05Z");
    expect(normalizeTime("2026-01-02T03:04:05.678Z")).toBe("2026-01-02T03:04:05Z");
    expect(normalizeTime(new Date("2026-01-02T03:04:05Z"))).toBe("2026-01-02T03:04:05Z");
  });
});
