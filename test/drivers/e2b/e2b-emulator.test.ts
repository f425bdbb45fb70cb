import { Readable } from "node:stream";
import {
  AuthenticationError,
  CommandExitError,
  FileNotFoundError,
  InvalidArgumentError,
  NotFoundError,
  Sandbox,
  SandboxNotFoundError,
  TimeoutError,
  type FilesystemEvent,
} from "e2b";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { E2bEmulator } from "../../fixtures/e2b-emulator/e2b-emulator";
import { describeE2b, eventually, requestViaHost, withEmulator } from "./support/e2b-env";

/**
 * The emulator driven by the unmodified e2b SDK through the SDK's own API surface, beyond what Berth's
 * driver calls: if the SDK accepts these answers, the driver's tests against the emulator mean something.
 */
describeE2b("E2B emulator: the unmodified e2b SDK against the loopback API and envd", () => {
  let emulator: E2bEmulator;
  let opts: E2bEmulator["connection"];
  const created: string[] = [];
  const create = async (options: Parameters<typeof Sandbox.create>[1] = {}) => {
    const sandbox = await Sandbox.create("base", { ...opts, ...options });
    created.push(sandbox.sandboxId);
    return sandbox;
  };
  /**
   * One default sandbox for the cases that only use it (commands, files, watches, ports), each in folders and
   * ports of its own; cases that pause, kill or configure a sandbox create theirs. A sandbox is a container
   * and its envd's Node start: five of them were a quarter of the file's time.
   */
  let plainSandbox: Promise<Sandbox> | null = null;
  const plain = () => (plainSandbox ??= create());

  beforeAll(async () => {
    emulator = await withEmulator();
    opts = emulator.connection;
  });
  afterAll(async () => {
    for (const id of created) await Sandbox.kill(id, opts).catch(() => undefined);
    await emulator?.close();
  });

  it("creates from a template with metadata, envs and a timeout, and reports them back", async () => {
    const before = Date.now();
    const sandbox = await create({
      metadata: { purpose: "info test" },
      envs: { GREETING: "hi" },
      timeoutMs: 120_000,
    });
    expect(sandbox.sandboxId).toMatch(/^i[a-z0-9]{19}$/);
    expect(sandbox.getHost(3000)).toBe(`3000-${sandbox.sandboxId}.${emulator.domain}`);
    const info = await sandbox.getInfo();
    expect(info).toMatchObject({ sandboxId: sandbox.sandboxId, templateId: "base", state: "running" });
    expect(info.metadata).toEqual({ purpose: "info test" });
    expect(info.endAt.getTime()).toBeGreaterThanOrEqual(before + 119_000);
    expect(info.endAt.getTime()).toBeLessThanOrEqual(Date.now() + 121_000);
    const result = await sandbox.commands.run('echo "$GREETING $USER $HOME"; pwd');
    expect(result).toMatchObject({ exitCode: 0, stdout: "hi user /home/user\n/home/user\n", stderr: "" });
    expect(await sandbox.isRunning()).toBe(true);

    await sandbox.setTimeout(30_000);
    const shortened = await Sandbox.getInfo(sandbox.sandboxId, opts);
    expect(shortened.endAt.getTime()).toBeLessThanOrEqual(Date.now() + 31_000);
  });

  it("lists by metadata (exact, AND, special characters), by state, and pages with nextToken", async () => {
    const tag = `run-${Date.now()}`;
    const a = await create({ metadata: { tag, name: "a b&c=d", team: "x" } });
    const b = await create({ metadata: { tag, name: "second", team: "x" } });
    const c = await create({ metadata: { tag, name: "third", team: "y" } });
    const ids = async (query: Parameters<typeof Sandbox.list>[0]) => {
      const paginator = Sandbox.list({ ...opts, ...query });
      const found: string[] = [];
      while (paginator.hasNext) found.push(...(await paginator.nextItems()).map((item) => item.sandboxId));
      return found;
    };
    expect((await ids({ query: { metadata: { tag } } })).sort()).toEqual(
      [a, b, c].map((s) => s.sandboxId).sort(),
    );
    expect(await ids({ query: { metadata: { tag, name: "a b&c=d" } } })).toEqual([a.sandboxId]);
    expect((await ids({ query: { metadata: { tag, team: "x" } } })).sort()).toEqual(
      [a.sandboxId, b.sandboxId].sort(),
    );
    expect(await ids({ query: { metadata: { tag: "nobody" } } })).toEqual([]);

    const pages: string[][] = [];
    const paginator = Sandbox.list({ ...opts, query: { metadata: { tag } }, limit: 2 });
    while (paginator.hasNext) pages.push((await paginator.nextItems()).map((item) => item.sandboxId));
    expect(pages.map((page) => page.length)).toEqual([2, 1]);
    expect(pages.flat().sort()).toEqual([a, b, c].map((s) => s.sandboxId).sort());

    await c.pause();
    expect(await ids({ query: { metadata: { tag }, state: ["paused"] } })).toEqual([c.sandboxId]);
    expect((await ids({ query: { metadata: { tag }, state: ["running"] } })).sort()).toEqual(
      [a.sandboxId, b.sandboxId].sort(),
    );
    const listed = await Sandbox.list({ ...opts, query: { metadata: { tag, name: "third" } } }).nextItems();
    expect(listed[0]).toMatchObject({ state: "paused", templateId: "base", cpuCount: 2, memoryMB: 512 });
  });

  it("runs commands: output, exit codes, streaming, cwd, user, envs", async () => {
    const sandbox = await plain();
    const failed = await sandbox.commands
      .run("echo out; echo err >&2; exit 3")
      .catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(CommandExitError);
    expect(failed).toMatchObject({ exitCode: 3, stdout: "out\n", stderr: "err\n", error: "exit status 3" });

    // Output streams while the command still runs: the first line arrives before the end.
    const seen: Array<{ chunk: string; running: boolean }> = [];
    const handle = await sandbox.commands.run("echo first; sleep 1; echo second", {
      background: true,
      onStdout: (chunk) => void seen.push({ chunk, running: handle.exitCode === undefined }),
    });
    const result = await handle.wait();
    expect(result.stdout).toBe("first\nsecond\n");
    expect(seen[0]).toEqual({ chunk: "first\n", running: true });

    expect((await sandbox.commands.run("id -u", { user: "root" })).stdout).toBe("0\n");
    expect((await sandbox.commands.run("pwd", { cwd: "/tmp" })).stdout).toBe("/tmp\n");
    await expect(sandbox.commands.run("pwd", { cwd: "/no/such/dir" })).rejects.toBeInstanceOf(
      InvalidArgumentError,
    );
    expect((await sandbox.commands.run("echo $A$B", { envs: { A: "1", B: "2" } })).stdout).toBe("12\n");
  });

  it("background commands: list, stdin, connect, kill, and the timeout that ends them", async () => {
    const sandbox = await plain();
    const cat = await sandbox.commands.run("cat", { background: true, stdin: true });
    await sandbox.commands.sendStdin(cat.pid, "from stdin\n");
    await sandbox.commands.closeStdin(cat.pid);
    expect((await cat.wait()).stdout).toBe("from stdin\n");

    const sleeper = await sandbox.commands.run("sleep 60", { background: true, timeoutMs: 0 });
    const listed = await sandbox.commands.list();
    expect(listed.find((entry) => entry.pid === sleeper.pid)).toMatchObject({
      cmd: "/bin/bash",
      args: ["-l", "-c", "sleep 60"],
    });
    const attached = await sandbox.commands.connect(sleeper.pid, { timeoutMs: 0 });
    expect(await sandbox.commands.kill(sleeper.pid)).toBe(true);
    const killed = await sleeper.wait().catch((error: unknown) => error);
    expect(killed).toMatchObject({ exitCode: -1, error: "signal: killed" });
    await expect(attached.wait()).rejects.toBeInstanceOf(CommandExitError);
    expect(await sandbox.commands.kill(sleeper.pid)).toBe(false);

    // Connect-Timeout-Ms is a process deadline in envd: the command is killed, not only the stream.
    const timedOut = await sandbox.commands
      .run("sleep 30", { timeoutMs: 700 })
      .catch((error: unknown) => error);
    expect(timedOut).toBeInstanceOf(TimeoutError);
    await eventually(
      async () =>
        (await sandbox.commands.list()).some((entry) => entry.args.includes("sleep 30")) ? undefined : true,
      { what: "the timed-out command to be gone" },
    );
  });

  it("files: write/read (text, bytes, streams), list, exists, info, mkdir, rename, remove, errors", async () => {
    const sandbox = await plain();
    const written = await sandbox.files.write("/home/user/dir/a.txt", "hello\n");
    expect(written).toMatchObject({ path: "/home/user/dir/a.txt", name: "a.txt", type: "file" });
    expect(await sandbox.files.read("/home/user/dir/a.txt")).toBe("hello\n");
    expect(await sandbox.files.read("dir/a.txt")).toBe("hello\n"); // relative to the user's home

    const binary = Uint8Array.from({ length: 256 }, (_, index) => index);
    await sandbox.files.write("/home/user/dir/bin", binary.buffer);
    expect(await sandbox.files.read("/home/user/dir/bin", { format: "bytes" })).toEqual(binary);

    const big = Buffer.alloc(3 * 1024 * 1024, 7);
    await sandbox.files.write("/home/user/dir/big", Readable.toWeb(Readable.from([big])) as ReadableStream);
    const stream = await sandbox.files.read("/home/user/dir/big", { format: "stream" });
    let size = 0;
    for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) size += chunk.length;
    expect(size).toBe(big.length);

    await sandbox.files.write([
      { path: "/home/user/multi/one", data: "1" },
      { path: "/home/user/multi/two", data: "2" },
    ]);
    expect((await sandbox.files.list("/home/user/multi")).map((entry) => entry.name)).toEqual(["one", "two"]);

    const entries = await sandbox.files.list("/home/user/dir");
    expect(entries.map((entry) => [entry.name, entry.type, entry.size])).toEqual([
      ["a.txt", "file", 6],
      ["big", "file", big.length],
      ["bin", "file", 256],
    ]);
    expect(await sandbox.files.exists("/home/user/dir/a.txt")).toBe(true);
    expect(await sandbox.files.exists("/home/user/dir/none")).toBe(false);
    const info = await sandbox.files.getInfo("/home/user/dir/a.txt");
    expect(info).toMatchObject({
      type: "file",
      size: 6,
      owner: "user",
      permissions: "-rw-r--r--",
      mode: 0o644,
    });
    expect(info.modifiedTime).toBeInstanceOf(Date);

    await sandbox.commands.run("ln -s /home/user/dir/a.txt /home/user/dir/link");
    expect(await sandbox.files.getInfo("/home/user/dir/link")).toMatchObject({
      type: "file",
      symlinkTarget: "/home/user/dir/a.txt",
    });

    expect(await sandbox.files.makeDir("/home/user/new/deep")).toBe(true);
    expect(await sandbox.files.makeDir("/home/user/new/deep")).toBe(false);
    const moved = await sandbox.files.rename("/home/user/dir/a.txt", "/home/user/new/deep/b.txt");
    expect(moved).toMatchObject({ name: "b.txt", path: "/home/user/new/deep/b.txt", type: "file" });
    await sandbox.files.remove("/home/user/new");
    expect(await sandbox.files.exists("/home/user/new")).toBe(false);
    await sandbox.files.remove("/home/user/new"); // missing: no error, as envd's RemoveAll

    await expect(sandbox.files.read("/home/user/none")).rejects.toBeInstanceOf(FileNotFoundError);
    await expect(sandbox.files.read("/home/user/dir")).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(sandbox.files.list("/home/user/none")).rejects.toBeInstanceOf(FileNotFoundError);
    await expect(sandbox.files.rename("/home/user/none", "/home/user/x")).rejects.toBeInstanceOf(
      FileNotFoundError,
    );
    expect((await sandbox.commands.run("stat -c %U /home/user/dir/big")).stdout).toBe("user\n");
  });

  it("watches a directory", async () => {
    const sandbox = await plain();
    await sandbox.files.makeDir("/home/user/watched");
    const events: FilesystemEvent[] = [];
    const watch = await sandbox.files.watchDir("/home/user/watched", (event) => void events.push(event), {
      timeoutMs: 0,
    });
    await sandbox.files.write("/home/user/watched/new.txt", "x");
    await eventually(
      () => Promise.resolve(events.some((event) => event.name === "new.txt") ? true : undefined),
      {
        what: "a watch event for new.txt",
      },
    );
    await watch.stop();
    expect(events.find((event) => event.name === "new.txt")?.type).toBeDefined();
  });

  it("pause keeps files and processes; connect resumes; pause without memory reboots", async () => {
    const sandbox = await create();
    await sandbox.files.write("/home/user/kept.txt", "kept");
    const sleeper = await sandbox.commands.run("sleep 300", { background: true, timeoutMs: 0 });
    await sleeper.disconnect();
    expect(await sandbox.pause()).toBe(true);
    expect(await sandbox.pause()).toBe(false);
    expect((await sandbox.getInfo()).state).toBe("paused");
    expect(await sandbox.isRunning()).toBe(false);

    const resumed = await Sandbox.connect(sandbox.sandboxId, opts);
    expect((await resumed.getInfo()).state).toBe("running");
    expect(await resumed.files.read("/home/user/kept.txt")).toBe("kept");
    expect((await resumed.commands.list()).some((entry) => entry.pid === sleeper.pid)).toBe(true);

    expect(await resumed.pause({ keepMemory: false })).toBe(true);
    const rebooted = await Sandbox.connect(sandbox.sandboxId, opts);
    expect(await rebooted.files.read("/home/user/kept.txt")).toBe("kept");
    expect((await rebooted.commands.list()).some((entry) => entry.pid === sleeper.pid)).toBe(false);
  });

  it("enforces the sandbox timeout: kill by default, pause with lifecycle.onTimeout", async () => {
    const killedOnTimeout = await create({ timeoutMs: 1_500 });
    await eventually(
      async () =>
        Sandbox.getInfo(killedOnTimeout.sandboxId, opts).then(
          () => undefined,
          (error: unknown) => (error instanceof SandboxNotFoundError ? true : undefined),
        ),
      { what: "the sandbox to be killed at its timeout" },
    );
    const pausedOnTimeout = await create({ timeoutMs: 1_500, lifecycle: { onTimeout: "pause" } });
    await pausedOnTimeout.files.write("/home/user/f", "survives");
    await eventually(async () => ((await pausedOnTimeout.getInfo()).state === "paused" ? true : undefined), {
      what: "the sandbox to pause at its timeout",
    });
    expect((await pausedOnTimeout.getInfo()).lifecycle).toEqual({ onTimeout: "pause", autoResume: false });
    const resumed = await Sandbox.connect(pausedOnTimeout.sandboxId, { ...opts, timeoutMs: 60_000 });
    expect(await resumed.files.read("/home/user/f")).toBe("survives");
  });

  it("exposes sandbox ports at <port>-<id>.<domain>, with the traffic token when public traffic is off", async () => {
    const open = await plain();
    const server = `require("http").createServer((q, s) => s.end("hello " + q.url)).listen(8080, "127.0.0.1")`;
    await open.commands.run(`node -e '${server}'`, { background: true, timeoutMs: 0 });
    const host = open.getHost(8080);
    const answer = await eventually(
      async () => {
        const response = await requestViaHost(emulator, host, "/path?q=1");
        return response.status === 200 ? response : undefined;
      },
      { what: "the in-sandbox server to answer" },
    );
    expect(answer.body).toBe("hello /path?q=1");
    expect((await requestViaHost(emulator, open.getHost(8081), "/")).status).toBe(502);

    const restricted = await create({ network: { allowPublicTraffic: false } });
    await restricted.commands.run(`node -e '${server}'`, { background: true, timeoutMs: 0 });
    const token = restricted.trafficAccessToken;
    expect(token).toBeTruthy();
    await eventually(
      async () => {
        const response = await requestViaHost(emulator, restricted.getHost(8080), "/", {
          "e2b-traffic-access-token": token!,
        });
        return response.status === 200 ? response : undefined;
      },
      { what: "the restricted server to answer with the token" },
    );
    expect((await requestViaHost(emulator, restricted.getHost(8080), "/")).status).toBe(403);
  });

  it("answers errors in E2B's shapes: bad key, unknown sandbox, killed sandbox", async () => {
    await expect(Sandbox.create("base", { ...opts, apiKey: "e2b_wrong" })).rejects.toBeInstanceOf(
      AuthenticationError,
    );
    await expect(Sandbox.create("no-such-template", opts)).rejects.toThrow(/404/);
    await expect(Sandbox.getInfo("inosuchsandbox000000", opts)).rejects.toBeInstanceOf(SandboxNotFoundError);
    await expect(Sandbox.connect("inosuchsandbox000000", opts)).rejects.toBeInstanceOf(NotFoundError);
    expect(await Sandbox.kill("inosuchsandbox000000", opts)).toBe(false);

    const sandbox = await create();
    expect(await sandbox.kill()).toBe(true);
    expect(await sandbox.kill()).toBe(false);
    expect(await sandbox.isRunning()).toBe(false);
    await expect(sandbox.setTimeout(10_000)).rejects.toBeInstanceOf(NotFoundError);
    // The edge answers 502 for a sandbox it does not know; the SDK reads that as a sandbox that is gone.
    await expect(sandbox.commands.run("true")).rejects.toBeInstanceOf(SandboxNotFoundError);
    await expect(sandbox.files.read("/etc/hostname")).rejects.toThrow();
    expect(emulator.sandbox(sandbox.sandboxId)).toBeUndefined();
  });
});
