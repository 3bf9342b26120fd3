// One active check of one backend, from the controller's network namespace (the LB pod's, which
// reaches backends the way the data plane does): a TCP connect, or an HTTP GET whose 2xx/3xx is
// healthy. Bounded by the check's timeout; never throws.
import { request } from "node:http";
import { connect } from "node:net";
import type { HealthTarget } from "./healthState.ts";

export type Probe = (target: HealthTarget) => Promise<boolean>;

export const probe: Probe = (t) =>
  new Promise((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      resolve(ok);
    };
    const timer = setTimeout(() => {
      cancel();
      resolve(false);
    }, t.spec.timeoutMs);
    let cancel: () => void;
    if (t.spec.kind === "tcp") {
      const socket = connect({ host: t.ip, port: t.port });
      cancel = () => socket.destroy();
      socket.once("connect", () => {
        socket.destroy();
        done(true);
      });
      socket.once("error", () => done(false));
    } else {
      const req = request({ host: t.ip, port: t.port, path: t.spec.path, agent: false }, (res) => {
        res.resume();
        done((res.statusCode ?? 500) < 400);
      });
      cancel = () => req.destroy();
      req.once("error", () => done(false));
      req.end();
    }
  });
