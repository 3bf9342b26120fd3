import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CONTROL_PLANE_IMAGE_NAMES, controlPlaneImages, labImage } from "./labImages.ts";

describe("the images toolenv.sh names", () => {
  let dir: string;
  beforeAll(() => (dir = mkdtempSync(join(tmpdir(), "lab-images-"))));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** The environment scripts/bootstrap/images.sh exports for `names`, with archives that exist. */
  function env(names: readonly string[]): NodeJS.ProcessEnv {
    return Object.fromEntries(
      names.flatMap((name) => {
        const key = `PORTABLE_LB_${name.toUpperCase().replaceAll("-", "_")}_IMAGE`;
        const archive = join(dir, `${name}.oci.tar`);
        writeFileSync(archive, "");
        return [
          [`${key}_ARCHIVE`, archive],
          [`${key}_REF`, `localhost/portable-lb/${name}:t`],
        ];
      }),
    );
  }

  it("reads each control-plane image's archive and reference, kubeadm's dashes as underscores", () => {
    const e = env(CONTROL_PLANE_IMAGE_NAMES);
    expect(e.PORTABLE_LB_KUBE_CONTROLLER_MANAGER_IMAGE_REF).toBe(
      "localhost/portable-lb/kube-controller-manager:t",
    );
    expect(controlPlaneImages(e)).toEqual(
      CONTROL_PLANE_IMAGE_NAMES.map((name) => ({
        archive: join(dir, `${name}.oci.tar`),
        ref: `localhost/portable-lb/${name}:t`,
      })),
    );
  });

  it("refuses a missing image, naming its variable and the fix", () => {
    const e = env(CONTROL_PLANE_IMAGE_NAMES.filter((name) => name !== "etcd"));
    expect(() => controlPlaneImages(e)).toThrow(
      /etcd image is missing \(PORTABLE_LB_ETCD_IMAGE_ARCHIVE=unset\): run scripts\/bootstrap\.sh/,
    );
    expect(() =>
      labImage("kube-proxy", { ...e, PORTABLE_LB_KUBE_PROXY_IMAGE_ARCHIVE: join(dir, "gone") }),
    ).toThrow(/PORTABLE_LB_KUBE_PROXY_IMAGE_ARCHIVE=.*gone/);
  });
});
