// The bootstrap script as cloud-init user data: written root-only, then run once on first boot.
// A fixed shape, so it is written out directly; the test checks it against cloud-init's schema.

export const BOOTSTRAP_SCRIPT_PATH = "/var/lib/portable-lb/bootstrap.sh";

/** `#cloud-config` that writes `script` to BOOTSTRAP_SCRIPT_PATH and runs it. */
export function renderCloudInit(script: string): string {
  if (!script.endsWith("\n") || script.includes("\t"))
    throw new Error("cloud-init: the script must end with a newline and hold no tabs (YAML block scalar)");
  const body = script
    .slice(0, -1)
    .split("\n")
    .map((line) => (line ? `      ${line}` : ""));
  return [
    "#cloud-config",
    "# portable-lb: the node bootstrap script, written for root only and run once (on first boot).",
    "write_files:",
    `  - path: ${BOOTSTRAP_SCRIPT_PATH}`,
    "    owner: root:root",
    '    permissions: "0700"',
    "    content: |",
    ...body,
    "runcmd:",
    `  - [bash, ${BOOTSTRAP_SCRIPT_PATH}]`,
    "",
  ].join("\n");
}
