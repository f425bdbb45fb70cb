import fs from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { BubblewrapMachine } from "@/server/workspace/drivers/bubblewrap/bubblewrap-machine";
import { SandboxedFolders } from "@/server/workspace/drivers/bubblewrap/sandboxed-folders";
import { resolveConfined } from "@/server/workspace/paths";
import {
  describeSandbox,
  hostProcessesOfUid,
  pollUntil,
  sandboxTestbed,
  specOf,
} from "./support/sandbox-env";

const sh = (backend: BubblewrapMachine, script: string, timeoutMs = 20_000) =>
  backend.exec(["/bin/sh", "-c", script], { timeoutMs });

/**
 * The default `local` backend against a member's Bash: what a command in one workspace can reach of the
 * host, of Berth and of other workspaces. Real bubblewrap, real processes, no mocks.
 */
describeSandbox("bubblewrap sandbox: confinement of commands", () => {
  let testbed: Awaited<ReturnType<typeof sandboxTestbed>>;
  let folders: SandboxedFolders;
  let mine: BubblewrapMachine;
  let theirs: BubblewrapMachine;
  let dataDir: string;

  beforeAll(async () => {
    testbed = await sandboxTestbed();
    folders = testbed.folders;
    mine = await folders.attach(specOf("ws-mine"));
    theirs = await folders.attach(specOf("ws-theirs", { tenantId: "tenant-b", userId: "user-b" }));
    await theirs.writeFile("/workspace/private.txt", "tenant b's secret");
    // Berth's data dir as `npm start` lays it out: .data/secrets.json, 0600.
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "berth-data-"));
    await fs.writeFile(path.join(dataDir, "secrets.json"), '{"authSecret":"s3cr3t"}', { mode: 0o600 });
  });

  afterAll(async () => {
    await testbed.cleanup();
    await fs.rm(dataDir, { recursive: true, force: true });
  });

  it("sees the workspace at /workspace as its cwd and HOME", async () => {
    const result = await sh(mine, 'pwd; echo "$HOME"');
    expect(result.stdout.toString()).toBe("/workspace\n/workspace\n");
    expect(mine.workdir).toBe("/workspace");
  });

  it("has an account for its uid (whoami, id, ~): tools that look the user up work", async () => {
    const result = await sh(
      mine,
      'whoami; id -un; id -gn; echo ~agent; getent passwd "$(id -u)" | cut -d: -f1',
    );
    expect(result.stderr.toString()).toBe("");
    expect(result.stdout.toString()).toBe("agent\nagent\nagent\n/workspace\nagent\n");
    // The host's files are untouched: the entry exists only inside the sandbox.
    if ((process.getuid?.() ?? 0) === 0) {
      const hostPasswd = await fs.readFile("/etc/passwd", "utf8");
      expect(hostPasswd).not.toMatch(/^agent:x:/m);
    }
  });

  it("cannot read another workspace, by its host path or by looking around", async () => {
    const hostPath = path.join(theirs.hostWorkdir, "private.txt");
    await expect(fs.readFile(hostPath, "utf8")).resolves.toBe("tenant b's secret"); // it is there
    const result = await sh(
      mine,
      `cat '${hostPath}'; ls '${testbed.basedir}'; find / -name private.txt 2>/dev/null`,
    );
    expect(result.stdout.toString()).not.toContain("secret");
    expect(result.stdout.toString()).not.toContain("private.txt");
    expect(result.stderr.toString()).toMatch(/No such file/);
  });

  it("cannot read Berth's secrets.json or the repository", async () => {
    const secrets = path.join(dataDir, "secrets.json");
    const repoFile = path.resolve("package.json");
    const result = await sh(
      mine,
      `cat '${secrets}'; cat '${repoFile}'; cat /proc/1/environ | tr '\\0' '\\n'`,
    );
    expect(result.stdout.toString()).not.toContain("s3cr3t");
    expect(result.stdout.toString()).not.toContain('"name"');
    expect(result.stdout.toString()).not.toMatch(/DATABASE_URL|REDIS_URL|BERTH_AUTH_SECRET/);
  });

  it("writes only inside the workspace: the system is read-only, /tmp is its own", async () => {
    const marker = `berth-escape-${Date.now()}`;
    const result = await sh(
      mine,
      `touch /usr/${marker}; touch /etc/${marker}; touch /${marker}; echo in > /tmp/${marker}; echo ok > inside.txt`,
    );
    expect(result.stderr.toString()).toMatch(/Read-only file system|Permission denied/);
    for (const escaped of [`/usr/${marker}`, `/etc/${marker}`, `/${marker}`, `/tmp/${marker}`]) {
      await expect(fs.stat(escaped)).rejects.toThrow(/ENOENT/);
    }
    await expect(fs.readFile(path.join(mine.hostWorkdir, "inside.txt"), "utf8")).resolves.toBe("ok\n");
  });

  it("runs as an unprivileged uid of its own: not root, not Berth's, not another workspace's", async () => {
    const uid = Number((await sh(mine, "id -u")).stdout.toString());
    const theirUid = Number((await sh(theirs, "id -u")).stdout.toString());
    expect(uid).not.toBe(0);
    if (process.getuid?.() === 0) {
      expect(uid).toBe(mine.options.identity.uid);
      expect(uid).not.toBe(theirUid);
      expect((await fs.stat(mine.hostWorkdir)).uid).toBe(uid);
      expect((await fs.stat(mine.hostWorkdir)).mode & 0o777).toBe(0o700);
    } else {
      expect(uid).toBe(process.getuid?.());
    }
  });

  it("has no network: a port listening on the host's loopback is unreachable", async () => {
    const server = net.createServer((socket) => socket.end("hello from the host\n"));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as net.AddressInfo;
    try {
      const probe = (p: number) =>
        `node -e 'const s=require("net").connect(${p},"127.0.0.1");s.on("data",d=>{process.stdout.write(d);process.exit(0)});s.on("error",e=>{console.log("refused:"+e.code);process.exit(3)})'`;
      const result = await sh(mine, `${probe(port)}; ${probe(6379)}; ${probe(5432)}`);
      expect(result.stdout.toString()).not.toContain("hello from the host");
      expect(result.stdout.toString().match(/refused:/g)?.length).toBe(3);
    } finally {
      server.close();
    }
  });

  it("sees only its own pid namespace", async () => {
    const result = await sh(mine, "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done");
    const lines = result.stdout.toString().split("\n").filter(Boolean);
    expect(lines.length).toBeLessThan(8);
    expect(result.stdout.toString()).not.toMatch(/vitest|postgres|redis-server/);
    const kill = await sh(mine, `kill -0 ${process.pid} && echo visible || echo hidden`);
    expect(kill.stdout.toString()).toContain("hidden");
  });

  it("keeps file ownership workable both ways: tools' files are the agent's, the agent's the tools'", async () => {
    await mine.writeFile("/workspace/notes/from-tool.txt", "tool\n");
    const edited = await sh(mine, "echo agent >> notes/from-tool.txt && echo made > notes/from-agent.txt");
    expect(edited.exitCode).toBe(0);
    const text = async (p: string) => {
      const chunks: Buffer[] = [];
      for await (const chunk of await mine.readFile(p)) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks).toString();
    };
    expect(await text("/workspace/notes/from-tool.txt")).toBe("tool\nagent\n");
    expect(await text("/workspace/notes/from-agent.txt")).toBe("made\n");
  });

  it("resolves links in the sandbox's view and never lets a file tool read through one to the host", async () => {
    const secrets = path.join(dataDir, "secrets.json");
    await sh(
      mine,
      `ln -s /workspace/notes/from-agent.txt inner; ln -s '${secrets}' outer; ln -s /etc/passwd etc`,
    );
    expect(await resolveConfined(mine, "inner")).toBe("/workspace/notes/from-agent.txt");
    await expect(resolveConfined(mine, "outer")).rejects.toMatchObject({ code: "FORBIDDEN" });
    await expect(resolveConfined(mine, "etc")).rejects.toMatchObject({ code: "FORBIDDEN" });
    // Even a backend call that skipped the check (or lost a race with the agent's shell) is refused.
    await expect(mine.readFile("/workspace/outer")).rejects.toMatchObject({ code: "FORBIDDEN" });
    await expect(mine.readFile("/workspace/etc")).rejects.toMatchObject({ code: "FORBIDDEN" });
  });
});

describeSandbox("bubblewrap sandbox: limits", () => {
  let testbed: Awaited<ReturnType<typeof sandboxTestbed>>;
  let backend: BubblewrapMachine;

  beforeAll(async () => {
    testbed = await sandboxTestbed({ pidsLimit: 64, commandTimeoutMs: 3_000 });
    backend = await testbed.folders.attach(specOf("ws-limits"));
  });
  afterAll(() => testbed.cleanup());

  it("contains a fork bomb: forks fail at the process limit and the sandbox dies whole", async () => {
    const result = await sh(backend, "bomb() { bomb | bomb & }; bomb; sleep 2", 60_000);
    // Forks fail at the process limit; when the command ends, every process of its sandbox ends too.
    expect(result.stderr.toString()).toMatch(/fork|Resource temporarily unavailable/i);
    expect(await testbed.folders.registry.live(backend.options.key)).toEqual([]);
    if (backend.options.identity.dropped) {
      // The kernel tears the pid namespace down right after its init exits.
      const uid = backend.options.identity.uid;
      expect(
        await pollUntil(
          () => hostProcessesOfUid(uid),
          (pids) => pids.length === 0,
        ),
      ).toEqual([]);
    }
    const again = await sh(backend, "echo alive");
    expect(again.stdout.toString()).toBe("alive\n");
  });

  it("stops a command at the configured time limit, background children included", async () => {
    const result = await sh(backend, "sleep 600 & sleep 600", 600_000);
    expect(result.timedOut).toBe(true);
    expect(await testbed.folders.registry.live(backend.options.key)).toEqual([]);
  });

  it("ends a command's background processes when the command ends", async () => {
    const result = await sh(backend, "(sleep 600 &) ; echo started");
    expect(result.stdout.toString()).toBe("started\n");
    expect(await testbed.folders.registry.live(backend.options.key)).toEqual([]);
  });
});

describeSandbox("bubblewrap sandbox: host folders", () => {
  it("refuses to provision under a parent the workspace uid cannot pass, saying what to change", async () => {
    const closed = await fs.mkdtemp(path.join(os.tmpdir(), "berth-closed-"));
    await fs.chmod(closed, 0o700);
    try {
      const folders = new SandboxedFolders({ basedir: path.join(closed, "workspaces") });
      await expect(folders.attach(specOf("ws-closed"))).rejects.toThrow(
        new RegExp(`${closed} is not traversable by other users.*chmod o\\+x`),
      );
    } finally {
      await fs.rm(closed, { recursive: true, force: true });
    }
  });
});
