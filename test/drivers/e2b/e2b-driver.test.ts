import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import tar from "tar-stream";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import type { WorkspaceDriver, WorkspaceSpec } from "@/server/workspace/drivers/driver";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import { ZMcpDeclaration, type LiveMcpClient } from "@/server/workspace/mcp/types";
import { copyPackageClosure } from "../docker/support/docker-env";
import { createDriverTestbed, type DriverTestbed } from "./support/e2b-driver-env";
import { describeE2b } from "./support/e2b-env";

async function text(stream: Readable, encoding: BufferEncoding = "utf8"): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString(encoding);
}

async function digest(stream: Readable): Promise<{ sha: string; size: number }> {
  const hash = createHash("sha256");
  let size = 0;
  for await (const chunk of stream) {
    hash.update(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  return { sha: hash.digest("hex"), size };
}

/** A host folder as an uncompressed tar stream (the system tar, streamed, nothing buffered). */
function tarOf(dir: string): Readable {
  const child = spawn("tar", ["-C", dir, "-cf", "-", "."], { stdio: ["ignore", "pipe", "inherit"] });
  return child.stdout;
}

describeE2b("E2B driver against the emulator: exec, files, archives and MCP through the backend port", () => {
  let testbed: DriverTestbed;
  let driver: WorkspaceDriver;
  let spec: WorkspaceSpec;
  let backend: WorkspaceMachine;
  const clients: LiveMcpClient[] = [];

  beforeAll(async () => {
    testbed = await createDriverTestbed();
    driver = testbed.newDriver();
    spec = testbed.spec();
    const handle = await driver.create(spec);
    spec = { ...spec, handle };
    backend = await driver.attach(spec);
  });
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.close()));
    if (spec) await driver?.purge(spec);
    await backend?.close();
    await testbed?.cleanup();
  });

  it("states its capabilities and runs commands as the template user in the workdir", async () => {
    expect(driver.persistent).toBe(true);
    expect(driver.isolation.isolated).toBe(true);
    expect(driver.capabilities).toEqual({
      hostPaths: false,
      pauseKeepsMemory: true,
      gateway: "sandbox-url",
      mayVanish: true,
      pty: true,
      previews: false,
      warmPool: true,
    });
    expect(backend).toMatchObject({ workdir: "/home/user/workspace" });
    expect("hostPath" in backend).toBe(false);
    const who = await backend.exec(["sh", "-c", "id -un; pwd"]);
    expect(who.stdout.toString()).toBe("user\n/home/user/workspace\n");
  });

  it("reports the sandbox's resource use from E2B's sandbox metrics: CPU, memory and disk, no process count", async () => {
    const stop = new AbortController();
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const busy = backend.exec(["sh", "-c", "echo started; while :; do :; done"], {
      signal: stop.signal,
      onStdout: () => started(),
    });
    await running;
    // E2B collects a point every 5 s and usage reads the latest, which may predate the loop: ask until a
    // point from while it runs is there. A busy loop has most of one of the template's two CPUs
    // (cpuUsedPct × cpuCount, in percent of a core), even on a loaded machine well over 20.
    const usage = await vi.waitFor(
      async () => {
        const latest = await driver.usage!(spec);
        expect(latest?.cpuPercent).toBeGreaterThan(20);
        return latest;
      },
      { timeout: 20_000, interval: 1_000 },
    );
    stop.abort();
    expect(usage).toMatchObject({ cpuSeconds: null, processes: null });
    expect(usage!.memoryBytes).toBeGreaterThan(1024 * 1024);
    // The root filesystem, the template's system included.
    expect(usage!.diskBytes).toBeGreaterThan(50 * 1024 * 1024);
    expect((await busy).killed).toBe(true);
  });

  it("exec streams stdout and stderr, reports exit codes, passes stdin, env and cwd", async () => {
    const seen: string[] = [];
    const result = await backend.exec(["sh", "-c", "echo out; echo err >&2; echo more; exit 3"], {
      onStdout: (chunk) => seen.push(`o:${chunk.toString()}`),
      onStderr: (chunk) => seen.push(`e:${chunk.toString()}`),
    });
    expect(result).toMatchObject({ exitCode: 3, timedOut: false, killed: false, truncated: false });
    expect(result.stdout.toString()).toBe("out\nmore\n");
    expect(result.stderr.toString()).toBe("err\n");
    expect(seen.join("")).toContain("e:err\n");

    await backend.mkdir("sub/dir");
    const fed = await backend.exec(["sh", "-c", 'cat; echo "$GREETING"; pwd'], {
      stdin: Readable.from([Buffer.from("from "), Buffer.from("stdin\n")]),
      env: { GREETING: "hello" },
      cwd: "sub/dir",
    });
    expect(fed.stdout.toString()).toBe("from stdin\nhello\n/home/user/workspace/sub/dir\n");
    expect((await backend.exec(["no-such-command-xyz"])).exitCode).toBe(127);
    expect((await backend.exec(["printf", "%s", 'it\'s "quoted" $HOME `x`'])).stdout.toString()).toBe(
      'it\'s "quoted" $HOME `x`',
    );

    let streamed = 0;
    const capped = await backend.exec(["head", "-c", "300000", "/dev/zero"], {
      maxBufferBytes: 1000,
      onStdout: (chunk) => (streamed += chunk.length),
    });
    expect(capped.stdout.length).toBe(1000);
    expect(capped.truncated).toBe(true);
    expect(streamed).toBe(300000);
  });

  it("exec output that is not UTF-8 arrives byte-exact, streamed and collected, on stdout and stderr", async () => {
    // The SDK decodes output with a non-fatal TextDecoder: without the in-sandbox relay these bytes came
    // back as U+FFFD (ef bf bd).
    const invalid = await backend.exec(["sh", "-c", "printf '\\377\\376'; printf '\\200x\\300' >&2"]);
    expect(invalid.stdout.toString("hex")).toBe("fffe");
    expect(invalid.stderr.toString("hex")).toBe("8078c0");

    const seen: Buffer[] = [];
    const random = await backend.exec(["sh", "-c", "head -c 256 /dev/urandom | tee random.bin"], {
      onStdout: (chunk) => seen.push(chunk),
    });
    const written = Buffer.from(await text(await backend.readFile("random.bin"), "latin1"), "latin1");
    expect(written.length).toBe(256);
    expect(random.stdout.equals(written)).toBe(true);
    expect(Buffer.concat(seen).equals(written)).toBe(true);

    // Exit statuses are the command's as sh reports them, through the relay too.
    expect((await backend.exec(["sh", "-c", "kill -9 $$"])).exitCode).toBe(137);
    expect((await backend.exec(["sh", "-c", "exit 42"])).exitCode).toBe(42);
    const notRunnable = await backend.exec(["/etc/hostname"]);
    expect(notRunnable.exitCode).toBe(126);
  });

  it("a timeout kills the whole process tree; an abort kills it too", async () => {
    const started = Date.now();
    const timedOut = await backend.exec(["sh", "-c", "sleep 300 & sleep 301 & wait"], { timeoutMs: 1_000 });
    expect(timedOut).toMatchObject({ exitCode: -1, timedOut: true, killed: false });
    expect(Date.now() - started).toBeLessThan(20_000);
    const left = await backend.exec(["sh", "-c", "ps -eo args | grep -c '^sleep 30[01]' || true"]);
    expect(left.stdout.toString().trim()).toBe("0");

    const controller = new AbortController();
    const running = backend.exec(["sh", "-c", "echo started; sleep 302"], {
      signal: controller.signal,
      onStdout: () => controller.abort(),
    });
    expect(await running).toMatchObject({ exitCode: -1, killed: true, timedOut: false });

    // No timeout means no timeout: the SDK's silent 60 s never reaches envd (no Connect-Timeout-Ms on the
    // wire for agent commands; Berth's own timer did the killing above).
    const sandboxId = String(spec.handle!.sandboxId);
    const starts = () =>
      testbed.emulator
        .envdCalls()
        .filter((call) => call.sandboxId === sandboxId && call.route === "/process.Process/Start");
    const before = starts().length;
    const quick = await backend.exec(["sh", "-c", "sleep 1; echo done"]);
    expect(quick.stdout.toString()).toBe("done\n");
    expect(starts().slice(before, before + 1)).toEqual([
      { sandboxId, route: "/process.Process/Start", connectTimeoutMs: null },
    ]);
  });

  it("files: streamed writes and reads, ranges, stat, list, mkdir, move, remove, realpath", async () => {
    const big = randomBytes(3 * 1024 * 1024 + 123);
    await backend.writeFile(
      "data/big.bin",
      Readable.from([big.subarray(0, 1_000_000), big.subarray(1_000_000)]),
    );
    const read = await digest(await backend.readFile("data/big.bin"));
    expect(read).toEqual({ sha: createHash("sha256").update(big).digest("hex"), size: big.length });

    const near = Buffer.concat(
      await (await backend.readFile("data/big.bin", { start: 10, end: 19 })).toArray(),
    );
    expect(near.equals(big.subarray(10, 20))).toBe(true);
    const far = Buffer.concat(
      await (await backend.readFile("data/big.bin", { start: 2_000_000, end: 2_000_099 })).toArray(),
    );
    expect(far.equals(big.subarray(2_000_000, 2_000_100))).toBe(true);
    const tail = Buffer.concat(
      await (await backend.readFile("data/big.bin", { start: big.length - 5 })).toArray(),
    );
    expect(tail.equals(big.subarray(big.length - 5))).toBe(true);

    await backend.writeFile("data/a.txt", "one\n");
    await backend.writeFile("data/a.txt", "two\n");
    expect(await text(await backend.readFile("data/a.txt"))).toBe("two\n");
    await backend.writeFile("data/a.txt", "three\n", { append: true });
    expect(await text(await backend.readFile("data/a.txt"))).toBe("two\nthree\n");
    await expect(backend.writeFile("data/a.txt", "x", { exclusive: true })).rejects.toMatchObject({
      code: "CONFLICT",
    });
    await backend.writeFile("data/new.txt", "fresh", { exclusive: true, mode: 0o600 });
    expect(await backend.stat("data/new.txt")).toMatchObject({ type: "file", size: 5, mode: 0o600 });
    expect((await backend.list("data")).map((entry) => entry.name).sort()).toEqual([
      "a.txt",
      "big.bin",
      "new.txt",
    ]);

    const stat = await backend.stat("data/a.txt");
    expect(stat).toMatchObject({ type: "file", size: 10, mode: 0o644 });
    expect(stat!.mtimeMs).toBeGreaterThan(Date.now() - 600_000);
    expect(await backend.stat("data")).toMatchObject({ type: "directory" });
    expect(await backend.stat("nope")).toBeNull();
    await backend.exec(["ln", "-s", "a.txt", "data/link"]);
    expect(await backend.stat("data/link")).toMatchObject({ type: "symlink" });
    expect(await backend.realpath("data/link")).toBe("/home/user/workspace/data/a.txt");
    expect(await backend.realpath("data/none")).toBeNull();

    await backend.move("data/a.txt", "moved/b.txt");
    expect(await text(await backend.readFile("moved/b.txt"))).toBe("two\nthree\n");
    await backend.remove("moved");
    await backend.remove("moved");
    expect(await backend.stat("moved")).toBeNull();
    await expect(backend.readFile("nope.txt")).rejects.toMatchObject({ code: "NOT_FOUND" });
    await expect(backend.readFile("data")).rejects.toMatchObject({ code: "BAD_REQUEST" });
    await expect(backend.list("nope")).rejects.toMatchObject({ code: "NOT_FOUND" });
    await expect(backend.move("nope", "x")).rejects.toMatchObject({ code: "NOT_FOUND" });
    const owner = await backend.exec(["stat", "-c", "%U", "data/big.bin", "data/new.txt"]);
    expect(owner.stdout.toString()).toBe("user\nuser\n");
    // Temporary uploads beside targets do not stay behind.
    expect(
      (await backend.exec(["sh", "-c", "ls -A data | grep -c berth- || true"])).stdout.toString().trim(),
    ).toBe("0");
  });

  it("archives: putArchive extracts a tar stream, getArchive streams one back", async () => {
    const pack = tar.pack();
    pack.entry({ name: "skill/README.md" }, "# skill\n");
    pack.entry({ name: "skill/bin/run.sh", mode: 0o755 }, "#!/bin/sh\necho ran\n");
    pack.finalize();
    await backend.putArchive("installed", Readable.from(pack));
    expect((await backend.exec(["sh", "installed/skill/bin/run.sh"])).stdout.toString()).toBe("ran\n");

    const names: string[] = [];
    const extract = tar.extract();
    extract.on("entry", (header, stream, next) => {
      names.push(header.name);
      stream.on("end", next);
      stream.resume();
    });
    await pipeline(await backend.getArchive("installed/skill"), extract);
    expect(names.sort()).toEqual(["skill/", "skill/README.md", "skill/bin/", "skill/bin/run.sh"]);
    await expect(backend.getArchive("no-such-dir")).rejects.toMatchObject({ code: "NOT_FOUND" });
  });

  it("runs a real stdio MCP server from npm inside the sandbox, through the gateway on the exposed port", async () => {
    const host = await fs.mkdtemp(path.join(testbed.basedir, "fixture-"));
    const packageDir = await copyPackageClosure("@modelcontextprotocol/server-everything", host);
    await backend.putArchive(".fixtures", tarOf(host));
    const script = path.posix.join(
      backend.workdir,
      ".fixtures",
      path.relative(host, packageDir),
      "dist/index.js",
    );
    const connector = await driver.connectMcp!(backend);
    const client = await connector.connect(
      ZMcpDeclaration.parse({
        name: "everything",
        is_stateful: true,
        mcp_config: { type: "stdio_mcp", command: "node", args: [script, "stdio"] },
      }),
      { agentId: "agent-1", sessionId: "session-1" },
    );
    clients.push(client);
    expect((await client.listTools()).map((tool) => tool.name)).toEqual(
      expect.arrayContaining(["echo", "get-sum"]),
    );
    expect(await client.callTool("echo", { message: "via E2B" })).toMatchObject({
      isError: false,
      content: [{ type: "text", text: "Echo: via E2B" }],
    });

    // The server runs as the workspace user, the gateway as root, on loopback only.
    const ps = (await backend.exec(["ps", "-eo", "user:12,args"])).stdout.toString().split("\n");
    expect(ps.find((line) => line.includes("server-everything"))).toMatch(/^user\s/);
    expect(ps.find((line) => line.includes("berth-gateway"))).toMatch(/^root\s/);
    const listening = await backend.exec(["sh", "-c", "cat /proc/net/tcp | awk '$4 == \"0A\" {print $2}'"]);
    expect(listening.stdout.toString()).toContain("0100007F:C346"); // 127.0.0.1:49990
    // The token is a host secret: not in the handle, not readable by the agent, in a 0600 file on the host.
    expect(JSON.stringify(spec.handle)).not.toMatch(/token/i);
    expect((await backend.exec(["sh", "-c", "ls /opt/berth 2>&1"])).stdout.toString()).toMatch(
      /Permission denied/,
    );
    const credentials = path.join(
      testbed.basedir,
      ".runtime",
      "e2b",
      `${String(spec.handle!.sandboxId)}.gateway.json`,
    );
    expect((await fs.stat(credentials)).mode & 0o777).toBe(0o600);
  });
});
