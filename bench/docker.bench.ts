import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import Docker from "dockerode";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import { DockerMachine } from "@/server/workspace/drivers/docker/docker-machine";
import { runExec } from "@/server/workspace/drivers/docker/docker-exec";
import { DockerContainers } from "@/server/workspace/drivers/docker/docker-containers";
import { LocalMcpConnector } from "@/server/workspace/mcp/local-connector";
import { ZMcpDeclaration, type LiveMcpClient } from "@/server/workspace/mcp/types";
import { copyPackageClosure } from "@/test/drivers/docker/support/package-closure";
import { median, result, type BenchResult } from "./lib";

/**
 * Docker workspaces on the real engine, each figure against a plain-Docker or host baseline measured in the
 * same run:
 * - cold create → first command (image cached, new container + gateway health) vs `create + start + exec` of
 *   a bare container of the base image;
 * - warm reattach → first command (new DockerContainers objects, container already there) vs one bare `docker exec`,
 *   twice: as the engine reattaches (the running gateway kept, its token read from the credentials file) and
 *   with the gateway restarted under a new token (what `open()` does by default);
 * - MCP tool-call latency through the in-container gateway (host → unix socket → gateway → stdio server)
 *   vs the same server-everything spawned on the host over stdio;
 * - a file round trip (stat + 1 KiB read + 1 KiB write) through the gateway's file endpoints vs the same
 *   three operations as `docker exec` scripts (the fallback path) on the same container.
 * Skipped, with the reason printed, when no engine or base image is available.
 */
const SOCKET_PATH = process.env.DOCKER_SOCKET ?? "/var/run/docker.sock";
const BASE_IMAGE = process.env.BERTH_BASE_IMAGE ?? "berth-base:bookworm";
const ROUNDS = 3;
/** Containers carry an installation label; the bench's own keeps them apart from any installation's. */
const deps = { installationId: () => Promise.resolve("bench") };
/** MCP echo calls timed on each side, after WARM_CALLS untimed ones (both processes' code optimised). */
const CALLS = 200;
const WARM_CALLS = 50;
const FILE_TRIPS = { gateway: 60, exec: 15 };

export async function run(): Promise<BenchResult[]> {
  const docker = new Docker({ socketPath: SOCKET_PATH });
  try {
    await docker.ping();
    await docker.getImage(BASE_IMAGE).inspect();
  } catch (error) {
    process.stdout.write(`  skipped: no Docker engine or ${BASE_IMAGE} (${String(error)})\n`);
    return [];
  }
  const dataRoot = await fs.mkdtemp(path.join(os.tmpdir(), "berth-bench-docker-"));
  const config = {
    socketPath: SOCKET_PATH,
    baseImage: BASE_IMAGE,
    dataRoot,
    runtimeRoot: path.join("/tmp", `berth-bench-${randomBytes(3).toString("hex")}`),
    stopTimeoutSeconds: 1,
  };
  const refs: Array<{ tenantId: string; userId: string; workspaceId: string }> = [];
  const cleanupContainers = new DockerContainers(config, deps);
  try {
    // Warm the image cache and the gateway bundle outside the timed parts.
    const warmup = {
      tenantId: "bench",
      userId: "bench",
      workspaceId: `warm${randomBytes(4).toString("hex")}`,
    };
    refs.push(warmup);
    const warm = await new DockerContainers(config, deps).open({ ...warmup, agentId: "bench" });
    await warm.gateway.ready;
    // The baseline runs the workspace image itself, with the same two bind mounts.
    const image = (await warm.backend.container.inspect()).Config.Image;

    const bareColdMs: number[] = [];
    const coldMs: number[] = [];
    const bareExecMs: number[] = [];
    const reattachMs: number[] = [];
    const keptGatewayMs: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      bareColdMs.push(await bareContainerFirstCommand(docker, image, dataRoot));

      const ref = {
        tenantId: "bench",
        userId: "bench",
        workspaceId: `cold${round}${randomBytes(3).toString("hex")}`,
      };
      refs.push(ref);
      let start = performance.now();
      const handle = await new DockerContainers(config, deps).open({ ...ref, agentId: "bench" });
      await handle.backend.exec(["true"]);
      coldMs.push(performance.now() - start);
      // The gateway starts beside the first command; let it finish before the next figure.
      await handle.gateway.ready;

      start = performance.now();
      await runExec(handle.backend.container, ["true"], { user: "1000:1000", env: {}, cwd: "/" }, {});
      bareExecMs.push(performance.now() - start);

      // A process restart: fresh objects, the container is still there.
      start = performance.now();
      const again = await new DockerContainers(config, deps).open({ ...ref, agentId: "bench" });
      await again.backend.exec(["true"]);
      reattachMs.push(performance.now() - start);
      await again.gateway.ready;

      // The engine's path (workers and API processes): the running gateway is kept.
      start = performance.now();
      const kept = await new DockerContainers(config, deps).open({
        ...ref,
        agentId: "bench",
        reuseToken: true,
      });
      await kept.backend.exec(["true"]);
      keptGatewayMs.push(performance.now() - start);
    }

    const { gatewayMs, hostMs } = await toolCallLatency(config, refs);
    const files = await fileRoundTrip(config, refs);
    return [
      result({
        name: "docker: cold create → first command",
        value: median(coldMs),
        unit: "ms",
        baseline: "bare container of the same image and bind mounts: create + start + exec (dockerode)",
        baselineValue: median(bareColdMs),
        target: { atMost: 1.5 },
      }),
      result({
        name: "docker: warm reattach (gateway kept) → first command",
        value: median(keptGatewayMs),
        unit: "ms",
        baseline: "one bare docker exec in a running container",
        baselineValue: median(bareExecMs),
      }),
      result({
        name: "docker: warm reattach (gateway restarted) → first command",
        value: median(reattachMs),
        unit: "ms",
        baseline: "one bare docker exec in a running container",
        baselineValue: median(bareExecMs),
        target: { atMost: 3 },
      }),
      result({
        name: "docker: MCP tool call via in-container gateway",
        value: gatewayMs,
        unit: "ms",
        baseline: "same server-everything over stdio on the host (median of calls)",
        baselineValue: hostMs,
        target: { atMost: 2 },
      }),
      result({
        name: "docker: file round trip (stat + 1 KiB read + 1 KiB write) via gateway",
        value: files.gatewayMs,
        unit: "ms",
        baseline: "same three operations as docker exec scripts (exec fallback path), same container",
        baselineValue: files.execMs,
        target: { atMost: 0.1 },
      }),
    ];
  } finally {
    for (const ref of refs) await cleanupContainers.purge(ref).catch(() => undefined);
    await fs.rm(dataRoot, { recursive: true, force: true });
    await fs.rm(config.runtimeRoot, { recursive: true, force: true });
  }
}

async function bareContainerFirstCommand(docker: Docker, image: string, dataRoot: string): Promise<number> {
  const dirs = await fs.mkdtemp(path.join(dataRoot, "bare-"));
  await fs.mkdir(path.join(dirs, "workspace"));
  await fs.mkdir(path.join(dirs, "run"));
  const start = performance.now();
  const container = await docker.createContainer({
    Image: image,
    Cmd: ["sleep", "infinity"],
    HostConfig: {
      NetworkMode: "none",
      Binds: [`${path.join(dirs, "workspace")}:/workspace:rw`, `${path.join(dirs, "run")}:/run/berth:rw`],
    },
  });
  try {
    await container.start();
    await runExec(container, ["true"], { user: "1000:1000", env: {}, cwd: "/" }, {});
    return performance.now() - start;
  } finally {
    await container.remove({ force: true });
  }
}

async function toolCallLatency(
  config: ConstructorParameters<typeof DockerContainers>[0],
  refs: Array<{ tenantId: string; userId: string; workspaceId: string }>,
): Promise<{ gatewayMs: number; hostMs: number }> {
  const ref = { tenantId: "bench", userId: "bench", workspaceId: `mcp${randomBytes(4).toString("hex")}` };
  refs.push(ref);
  const handle = await new DockerContainers(config, deps).open({ ...ref, agentId: "bench" });
  const packageDir = await copyPackageClosure(
    "@modelcontextprotocol/server-everything",
    path.join(handle.hostWorkdir, ".fixtures"),
  );
  const inContainer = path.posix.join(
    "/workspace",
    path.relative(handle.hostWorkdir, packageDir),
    "dist/index.js",
  );
  const onHost = path.resolve("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
  const declaration = (script: string) =>
    ZMcpDeclaration.parse({
      name: "everything",
      is_stateful: true,
      mcp_config: { type: "stdio_mcp", command: "node", args: [script, "stdio"] },
    });
  const scope = { agentId: "bench", sessionId: "bench" };
  const gatewayClient = await handle.mcpConnector.connect(declaration(inContainer), scope);
  const hostClient = await new LocalMcpConnector().connect(declaration(onHost), scope);
  try {
    return await medianCallMs(gatewayClient, hostClient);
  } finally {
    await gatewayClient.close();
    await hostClient.close();
  }
}

async function fileRoundTrip(
  config: ConstructorParameters<typeof DockerContainers>[0],
  refs: Array<{ tenantId: string; userId: string; workspaceId: string }>,
): Promise<{ gatewayMs: number; execMs: number }> {
  const ref = { tenantId: "bench", userId: "bench", workspaceId: `files${randomBytes(4).toString("hex")}` };
  refs.push(ref);
  const handle = await new DockerContainers(config, deps).open({ ...ref, agentId: "bench" });
  if (!handle.gateway.files) throw new Error("the gateway does not serve file endpoints");
  // The same container without the gateway's file client: every operation is a docker exec script.
  const execOnly = new DockerMachine({
    container: handle.backend.container,
    user: "1000:1000",
    env: { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", HOME: "/home/berth" },
  });
  const payload = randomBytes(1024);
  await handle.backend.writeFile("bench/file.bin", payload);
  const trip = async (backend: WorkspaceMachine) => {
    const start = performance.now();
    await backend.stat("bench/file.bin");
    for await (const chunk of await backend.readFile("bench/file.bin")) void chunk;
    await backend.writeFile("bench/out.bin", payload);
    return performance.now() - start;
  };
  const samples = async (backend: WorkspaceMachine, count: number) => {
    for (let i = 0; i < 3; i++) await trip(backend);
    const times: number[] = [];
    for (let i = 0; i < count; i++) times.push(await trip(backend));
    return median(times);
  };
  return {
    gatewayMs: await samples(handle.backend, FILE_TRIPS.gateway),
    execMs: await samples(execOnly, FILE_TRIPS.exec),
  };
}

/**
 * Median latency of an `echo` call on each client, the calls alternating between them: load on the
 * machine that drifts during the run falls on both sides alike instead of on whichever ran second.
 */
async function medianCallMs(
  gatewayClient: LiveMcpClient,
  hostClient: LiveMcpClient,
): Promise<{ gatewayMs: number; hostMs: number }> {
  for (let i = 0; i < WARM_CALLS; i++) {
    await gatewayClient.callTool("echo", { message: "warm" });
    await hostClient.callTool("echo", { message: "warm" });
  }
  const timed = async (client: LiveMcpClient, message: string) => {
    const start = performance.now();
    await client.callTool("echo", { message });
    return performance.now() - start;
  };
  const gateway: number[] = [];
  const host: number[] = [];
  for (let i = 0; i < CALLS; i++) {
    gateway.push(await timed(gatewayClient, `call ${i}`));
    host.push(await timed(hostClient, `call ${i}`));
  }
  return { gatewayMs: median(gateway), hostMs: median(host) };
}
