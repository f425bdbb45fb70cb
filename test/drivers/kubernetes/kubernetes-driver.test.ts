import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import tar from "tar-stream";
import { afterAll, beforeAll, expect, it } from "vitest";
import { isAppError } from "@/server/shared/errors";
import type { CreateProgress, WorkspaceDriver, WorkspaceSpec } from "@/server/workspace/drivers/driver";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import { ZMcpDeclaration, type LiveMcpClient, type TMcpDeclaration } from "@/server/workspace/mcp/types";
import { copyPackageClosure } from "@/test/drivers/docker/support/package-closure";
import { createDriverTestbed, describeKube, type DriverTestbed } from "./support/kube-env";

const EVERYTHING = "@modelcontextprotocol/server-everything";

async function text(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

async function rejection(promise: Promise<unknown>) {
  return promise.then(
    () => null,
    (error: unknown) => error,
  );
}

/** A host folder as an uncompressed tar stream (system tar), for putArchive. */
function tarOf(dir: string): Readable {
  return spawn("tar", ["-c", "-f", "-", "-C", dir, "."], { stdio: ["ignore", "pipe", "inherit"] }).stdout;
}

describeKube("Kubernetes driver against the loopback API server emulator", () => {
  let bed: DriverTestbed;
  let driver: WorkspaceDriver;
  let spec: WorkspaceSpec;
  let backend: WorkspaceMachine;
  let podOfSpec = "";
  let everything: TMcpDeclaration | null = null;
  const clients: LiveMcpClient[] = [];

  const provision = async (target: WorkspaceDriver, workspace: WorkspaceSpec) => {
    const steps: CreateProgress[] = [];
    const handle = await target.create(workspace, { onProgress: (step) => steps.push(step) });
    return { handle, steps: steps.map((step) => step.step), details: steps };
  };

  beforeAll(async () => {
    bed = await createDriverTestbed();
    driver = bed.newDriver();
    spec = bed.specFor();
  });
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
    await bed?.cleanup();
  });

  it("states its capabilities and provisions one Pod and one claim named after the workspace", async () => {
    expect(driver.persistent).toBe(true);
    expect(driver.isolation.isolated).toBe(true);
    expect(driver.capabilities).toEqual({
      hostPaths: false,
      pauseKeepsMemory: false,
      gateway: "exec-stream",
      mayVanish: true,
      pty: true,
      previews: false,
      warmPool: true,
    });
    const { handle, steps } = await provision(driver, spec);
    podOfSpec = handle.pod as string;
    expect(steps).toEqual([
      "claim.created",
      "pod.created",
      "pod.running",
      "gateway.starting",
      "gateway.ready",
    ]);
    expect(handle).toMatchObject({
      kind: "kubernetes",
      namespace: bed.namespace,
      pod: expect.stringMatching(/^berth-ws-w[0-9a-f]{12}-[0-9a-f]{8}$/),
    });

    const pod = await bed.core.readNamespacedPod({ namespace: bed.namespace, name: handle.pod as string });
    expect(pod.metadata?.labels).toMatchObject({
      "app.kubernetes.io/managed-by": "berth",
      "berth.dev/workspace": spec.workspaceId,
      "berth.dev/tenant": spec.tenantId,
      "berth.dev/user": spec.userId,
      "berth.dev/agent": spec.agentId,
    });
    expect(pod.spec?.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000, fsGroup: 1000 });
    expect(pod.spec?.automountServiceAccountToken).toBe(false);
    expect(pod.spec?.containers.map((container) => container.name)).toEqual(["workspace", "gateway"]);
    for (const container of pod.spec?.containers ?? []) {
      expect(container.securityContext).toMatchObject({
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ["ALL"] },
      });
      expect(container.resources?.limits).toBeDefined();
    }
    const claim = await bed.core.readNamespacedPersistentVolumeClaim({
      namespace: bed.namespace,
      name: handle.claim as string,
    });
    expect(claim.spec?.resources?.requests?.storage).toBe("10Gi");
    const policy = await bed.networking.readNamespacedNetworkPolicy({
      namespace: bed.namespace,
      name: "berth-workspaces-deny-egress",
    });
    expect(policy.spec).toMatchObject({ policyTypes: ["Egress", "Ingress"], egress: [] });

    backend = await driver.attach(spec);
    expect(await driver.isAlive(backend)).toBe(true);
  });

  it("runs commands: streamed output, exit codes, stdin with EOF, env and cwd, 127 for a missing command", async () => {
    const seen: Array<{ at: number; chunk: string }> = [];
    const started = Date.now();
    const streamed = await backend.exec(["sh", "-c", "echo first; sleep 1.5; echo second >&2; exit 3"], {
      onStdout: (chunk) => seen.push({ at: Date.now() - started, chunk: chunk.toString() }),
    });
    expect(streamed).toMatchObject({ exitCode: 3, timedOut: false, killed: false });
    expect(streamed.stdout.toString()).toBe("first\n");
    expect(streamed.stderr.toString()).toBe("second\n");
    // The first line arrived while the command was still sleeping.
    expect(seen[0]!.at).toBeLessThan(Date.now() - started - 1000);

    const payload = randomBytes(3 * 1024 * 1024);
    const counted = await backend.exec(["sh", "-c", "sha256sum | cut -d' ' -f1"], {
      stdin: Readable.from([payload.subarray(0, 1e6), payload.subarray(1e6)]),
    });
    expect(counted.stdout.toString().trim()).toBe(createHash("sha256").update(payload).digest("hex"));

    await backend.mkdir("sub dir");
    const env = await backend.exec(["sh", "-c", 'echo "$GREETING" "$(pwd)" "$(id -u)"'], {
      cwd: "sub dir",
      env: { GREETING: "hi there=1" },
    });
    expect(env.stdout.toString()).toBe("hi there=1 /workspace/sub dir 1000\n");
    expect((await backend.exec(["no-such-command-xyz"])).exitCode).toBe(127);
    const capped = await backend.exec(["sh", "-c", "head -c 5000 /dev/zero"], { maxBufferBytes: 1000 });
    expect(capped).toMatchObject({ truncated: true });
    expect(capped.stdout.length).toBe(1000);
  });

  it("kills the whole process tree on timeout and on abort", async () => {
    const timed = await backend.exec(["sh", "-c", "sleep 300 & sleep 301"], {
      timeoutMs: 1_000,
    });
    expect(timed).toMatchObject({ timedOut: true, killed: false, exitCode: -1 });
    expect(timed.stderr.toString()).toBe("");
    const controller = new AbortController();
    const running = backend.exec(["sh", "-c", "sleep 302 & sleep 303"], { signal: controller.signal });
    setTimeout(() => controller.abort(), 800);
    expect(await running).toMatchObject({ killed: true, exitCode: -1 });
    const ps = await backend.exec(["ps", "-eo", "args"]);
    expect(ps.stdout.toString()).not.toMatch(/sleep 30[0-4]/);
    // A command that exits while its background child still holds the output: the timeout kills the child.
    const orphan = await backend.exec(["sh", "-c", "sleep 304 & exit 0"], { timeoutMs: 1_000 });
    expect(orphan).toMatchObject({ timedOut: true });
    expect((await backend.exec(["ps", "-eo", "args"])).stdout.toString()).not.toMatch(/sleep 304/);
    expect(await driver.isAlive(backend)).toBe(true);
  });

  it("moves files through exec: streamed reads and writes, ranges, atomic replace, exclusive create, append", async () => {
    await backend.writeFile("notes/a.txt", "hello world");
    expect(await text(await backend.readFile("notes/a.txt"))).toBe("hello world");
    expect(await text(await backend.readFile("notes/a.txt", { start: 6, end: 9 }))).toBe("worl");
    expect(await text(await backend.readFile("notes/a.txt", { start: 6 }))).toBe("world");
    await backend.writeFile("notes/a.txt", " again", { append: true });
    expect(await text(await backend.readFile("notes/a.txt"))).toBe("hello world again");
    const conflict = await rejection(backend.writeFile("notes/a.txt", "x", { exclusive: true }));
    expect(isAppError(conflict) && conflict.code).toBe("CONFLICT");
    await backend.writeFile("notes/new.txt", "fresh", { exclusive: true, mode: 0o600 });
    expect(await backend.stat("notes/new.txt")).toMatchObject({ type: "file", size: 5, mode: 0o600 });

    const big = randomBytes(8 * 1024 * 1024);
    await backend.writeFile("big.bin", Readable.from([big.subarray(0, 4e6), big.subarray(4e6)]));
    const read = createHash("sha256");
    for await (const chunk of await backend.readFile("big.bin")) read.update(chunk as Buffer);
    expect(read.digest("hex")).toBe(createHash("sha256").update(big).digest("hex"));

    expect((await backend.list("notes")).map((entry) => entry.name).sort()).toEqual(["a.txt", "new.txt"]);
    await backend.move("notes/new.txt", "moved/n.txt");
    expect(await backend.stat("notes/new.txt")).toBeNull();
    expect(await backend.realpath("moved/../moved/n.txt")).toBe("/workspace/moved/n.txt");
    expect(await backend.realpath("missing")).toBeNull();
    await backend.remove("moved");
    expect(await backend.stat("moved")).toBeNull();
    const missing = await rejection(backend.readFile("nope.txt"));
    expect(isAppError(missing) && missing.code).toBe("NOT_FOUND");
    const directory = await rejection(backend.readFile("notes"));
    expect(isAppError(directory) && directory.code).toBe("BAD_REQUEST");
  });

  it("extracts and produces tar archives over exec", async () => {
    const pack = tar.pack();
    pack.entry({ name: "skill/SKILL.md" }, "# skill\n");
    pack.entry({ name: "skill/bin/run.sh", mode: 0o755 }, "#!/bin/sh\necho ran\n");
    pack.finalize();
    await backend.putArchive("skills", Readable.from(pack));
    expect((await backend.exec(["sh", "skills/skill/bin/run.sh"])).stdout.toString()).toBe("ran\n");

    const extract = tar.extract();
    const names: string[] = [];
    extract.on("entry", (header, stream, next) => {
      names.push(header.name);
      stream.on("end", () => next());
      stream.resume();
    });
    const finished = new Promise<void>((resolve) => extract.on("finish", () => resolve()));
    (await backend.getArchive("skills/skill")).pipe(extract);
    await finished;
    expect(names.sort()).toEqual(["skill/", "skill/SKILL.md", "skill/bin/", "skill/bin/run.sh"]);
  });

  it("runs MCP servers in the gateway container, out of the agent's reach", async () => {
    const staging = await fs.mkdtemp(path.join(os.tmpdir(), "berth-k8s-mcp-"));
    try {
      const packageDir = await copyPackageClosure(EVERYTHING, staging);
      await backend.putArchive(".fixtures", tarOf(staging));
      const script = path.posix.join(
        "/workspace/.fixtures",
        path.relative(staging, packageDir),
        "dist/index.js",
      );
      const connector = await driver.connectMcp!(backend);
      everything = ZMcpDeclaration.parse({
        name: "everything",
        is_stateful: true,
        mcp_config: { type: "stdio_mcp", command: "node", args: [script, "stdio"] },
      });
      const client = await connector.connect(everything, { agentId: "agent-k8s", sessionId: "s1" });
      clients.push(client);
      expect((await client.listTools()).map((tool) => tool.name)).toEqual(
        expect.arrayContaining(["echo", "get-sum"]),
      );
      expect(await client.callTool("echo", { message: "through the API server" })).toMatchObject({
        isError: false,
        content: [{ type: "text", text: "Echo: through the API server" }],
      });
    } finally {
      await fs.rm(staging, { recursive: true, force: true });
    }
    // The agent's container has its own PID namespace and no access to the gateway's runtime folder.
    const ps = await backend.exec(["ps", "-eo", "args"]);
    expect(ps.stdout.toString()).not.toMatch(/berth-gateway|server-everything/);
    expect((await backend.exec(["ls", "/run/berth"])).exitCode).not.toBe(0);
  });

  it("reports the Pod's resource use: CPU and memory from the metrics API, disk and processes from an exec", async () => {
    // A busy loop and a sleeper in the background: CPU in use, and processes to count.
    const stop = new AbortController();
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const busy = backend.exec(["sh", "-c", "sleep 30 & echo started; while :; do :; done"], {
      signal: stop.signal,
      onStdout: () => started(),
    });
    await running;
    const usage = await driver.usage!(spec);
    stop.abort();
    expect(usage).toMatchObject({ cpuSeconds: null, processes: expect.any(Number) });
    // The busy loop has most of a core (the emulator's window is the engine's one second).
    expect(usage!.cpuPercent).toBeGreaterThan(20);
    expect(usage!.memoryBytes).toBeGreaterThan(1024 * 1024);
    // The workdir holds big.bin (8 MiB) and the notes; both containers' init, the gateway, the loop, the sleeper.
    expect(usage!.diskBytes).toBeGreaterThan(5 * 1024 * 1024);
    expect(usage!.processes).toBeGreaterThanOrEqual(5);
    expect((await busy).killed).toBe(true);
  });

  it("reattaches after a restart: a new driver finds the same Pod, claim, files and gateway", async () => {
    const before = await bed.core.readNamespacedPod({ namespace: bed.namespace, name: podOfSpec });
    const restarted = bed.newDriver();
    const again = await provision(restarted, spec);
    // Same Pod, and the gateway's credentials (a Secret of the Pod) let it reuse the running gateway.
    expect(again.steps).toEqual(["claim.reused", "pod.reattached", "gateway.ready"]);
    expect(again.handle.podUid).toBe(before.metadata?.uid);
    const attached = await restarted.attach(spec);
    expect(await text(await attached.readFile("notes/a.txt"))).toBe("hello world again");
    // The gateway's servers belong to the Pod: the restarted process adopts the stateful session.
    const connector = await restarted.connectMcp!(attached);
    const client = await connector.connect(everything!, { agentId: "agent-k8s", sessionId: "s1" });
    clients.push(client);
    expect(JSON.stringify((await client.callTool("get-sum", { a: 40, b: 2 })).content)).toContain("42");
    await restarted.detach(attached);
  });

  it("stop deletes the Pod and keeps the claim; the next provision recreates the Pod on it; purge removes both", async () => {
    await driver.stop(spec);
    expect(await driver.isAlive(backend)).toBe(false);
    expect(await driver.usage!(spec)).toBeNull();
    const pods = await bed.core.listNamespacedPod({
      namespace: bed.namespace,
      labelSelector: `berth.dev/workspace=${spec.workspaceId}`,
    });
    expect(pods.items).toHaveLength(0);
    expect(await driver.exists(spec)).toBe(true);

    const { steps } = await provision(driver, spec);
    expect(steps).toEqual([
      "claim.reused",
      "pod.created",
      "pod.running",
      "gateway.starting",
      "gateway.ready",
    ]);
    const fresh = await driver.attach(spec);
    expect(await text(await fresh.readFile("notes/a.txt"))).toBe("hello world again");
    expect((await fresh.exec(["cat", "big.bin"], { maxBufferBytes: 0 })).exitCode).toBe(0);

    const listed = await driver.listResources();
    expect(listed).toContainEqual({
      workspaceId: spec.workspaceId,
      tenantId: spec.tenantId,
      locator: expect.stringContaining(bed.namespace),
    });
    const receipt = await driver.purge(spec);
    expect(receipt).toEqual([
      expect.stringMatching(/^pod:/),
      expect.stringMatching(/^persistentvolumeclaim:/),
    ]);
    expect(await driver.exists(spec)).toBe(false);
    const claims = await bed.core.listNamespacedPersistentVolumeClaim({
      namespace: bed.namespace,
      labelSelector: `berth.dev/workspace=${spec.workspaceId}`,
    });
    expect(claims.items).toHaveLength(0);
    const secrets = await bed.core.listNamespacedSecret({ namespace: bed.namespace });
    expect(secrets.items.filter((secret) => secret.metadata?.name?.startsWith("berth-ws-"))).toHaveLength(0);
    await fresh.close();
  });
});
