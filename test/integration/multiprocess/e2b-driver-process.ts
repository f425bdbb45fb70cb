/**
 * A process that runs the E2B driver alone, as a worker or an API replica builds it from the environment
 * (E2B_API_KEY, BERTH_E2B_*: the test points them at its loopback emulator). Prints "ready", then answers
 * one JSON line per request line on stdin:
 *   {"op":"provision","spec":…}             → {"ok":true,"handle":…}   (WorkspaceDriver.create)
 *   {"op":"exec","spec":…,"argv":[…]}       → {"ok":true,"exitCode":…,"stdout":"<base64>"} (attach, exec, detach)
 * A "go" line is the start signal the test sends every process at once; requests wait for it.
 */
import { createInterface } from "node:readline";
import type { WorkspaceSpec } from "@/server/workspace/drivers/driver";
import { e2bDriver } from "@/server/workspace/drivers/e2b/driver";
import { ZE2bDriverConfig } from "@/server/workspace/drivers/e2b/e2b-config";

const context = {
  basedir: process.env.BERTH_WORKSPACE_BASEDIR!,
  cwd: process.cwd(),
  uid: process.getuid?.() ?? -1,
};
const driver = e2bDriver.create(
  ZE2bDriverConfig.parse(e2bDriver.configFromEnv(process.env, context)),
  context,
);

type Request = { op: "provision"; spec: WorkspaceSpec } | { op: "exec"; spec: WorkspaceSpec; argv: string[] };

async function answer(request: Request): Promise<Record<string, unknown>> {
  if (request.op === "provision") return { handle: await driver.create(request.spec) };
  const backend = await driver.attach(request.spec);
  try {
    const result = await backend.exec(request.argv);
    return { exitCode: result.exitCode, stdout: result.stdout.toString("base64") };
  } finally {
    await (driver.detach?.(backend) ?? backend.close());
  }
}

process.stdout.write("ready\n");
let started: () => void = () => undefined;
const go = new Promise<void>((resolve) => (started = resolve));
for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() === "go") {
    started();
    continue;
  }
  if (!line.trim()) continue;
  const request = JSON.parse(line) as Request;
  void go
    .then(() => answer(request))
    .then(
      (result) => process.stdout.write(`${JSON.stringify({ ok: true, ...result })}\n`),
      (error: unknown) => process.stdout.write(`${JSON.stringify({ ok: false, error: String(error) })}\n`),
    );
}
