import { createHash, randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import tar from "tar-stream";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import { SkillStore } from "@/server/workspace/skills/skill-store";
import type { DockerWorkspaceHandle } from "@/server/workspace/drivers/docker/docker-containers";
import { createDockerTestbed, describeDocker } from "./support/docker-env";

describeDocker("Docker machine: exec and files on a real container", () => {
  let testbed: Awaited<ReturnType<typeof createDockerTestbed>>;
  let ws: DockerWorkspaceHandle;

  beforeAll(async () => {
    testbed = await createDockerTestbed();
    ws = await testbed.open(testbed.newContainers());
  });
  afterAll(async () => {
    await testbed?.cleanup();
  });

  it("creates a running, labelled, limited container with the workdir bind-mounted and a non-root user", async () => {
    const info = await ws.backend.container.inspect();
    expect(info.Name).toBe(`/${ws.containerName}`);
    expect(ws.containerName).toMatch(new RegExp(`^berth-ws-${ws.ref.workspaceId}-[0-9a-f]{8}$`));
    expect(info.State.Running).toBe(true);
    expect(info.Config.Labels).toMatchObject({
      "dev.berth.workspace": ws.ref.workspaceId,
      "dev.berth.tenant": "tenant-test",
      "dev.berth.user": "user-test",
      "dev.berth.agent": "agent-test",
    });
    expect(info.HostConfig.NetworkMode).toBe("none");
    expect(info.HostConfig.Memory).toBe(512 * 1024 * 1024);
    expect(info.HostConfig.PidsLimit).toBe(256);
    expect(info.HostConfig.NanoCpus).toBe(1e9);
    expect(info.Mounts.find((mount) => mount.Destination === "/workspace")?.Source).toBe(ws.hostWorkdir);

    const id = await ws.backend.exec(["id", "-u"]);
    expect(id.stdout.toString().trim()).toBe("1000");
    const pwd = await ws.backend.exec(["pwd"]);
    expect(pwd.stdout.toString().trim()).toBe("/workspace");
    // network mode none: only loopback exists
    const links = await ws.backend.exec(["cat", "/proc/net/dev"]);
    expect(links.stdout.toString()).not.toMatch(/eth0/);
  });

  it("has the tools agents reach for, as the workspace user and without network: git, ripgrep, python3 with venv, npm and npx, gcc and make", async () => {
    const script = [
      "set -e",
      "git --version",
      "rg --version | sed -n 1p",
      "python3 -c 'print(6 * 7)'",
      "python3 -m venv /tmp/venv && /tmp/venv/bin/python -c 'import sys; print(sys.prefix)'",
      "npm --version",
      // npx runs a package already on disk without the registry (the container has no network).
      "mkdir -p /tmp/pkg/node_modules/.bin && printf '#!/bin/sh\\necho from-npx\\n' > /tmp/pkg/node_modules/.bin/hello",
      "chmod +x /tmp/pkg/node_modules/.bin/hello && cd /tmp/pkg && npx --no-install hello",
      // A C program built with make and run: the toolchain agents need for native packages.
      "mkdir -p /tmp/c && cd /tmp/c && printf 'int main(void){return 0;}\\n' > t.c",
      "printf 'all:\\n\\tgcc -o t t.c\\n' > Makefile && make -s && ./t && echo built",
    ].join("\n");
    const result = await ws.backend.exec(["/bin/sh", "-c", script]);
    expect(result.stderr.toString()).toBe("");
    const lines = result.stdout.toString().trim().split("\n");
    expect(lines).toEqual([
      expect.stringMatching(/^git version /),
      expect.stringMatching(/^ripgrep /),
      "42",
      "/tmp/venv",
      expect.stringMatching(/^\d+\.\d+\.\d+$/),
      "from-npx",
      "built",
    ]);
  });

  it("exec separates stdout and stderr, streams them to callbacks and reports the exit code", async () => {
    const seen: string[] = [];
    const result = await ws.backend.exec(["sh", "-c", "echo out; echo err >&2; echo more; exit 3"], {
      onStdout: (chunk) => seen.push(`o:${chunk.toString()}`),
      onStderr: (chunk) => seen.push(`e:${chunk.toString()}`),
    });
    expect(result.exitCode).toBe(3);
    expect(result.stdout.toString()).toBe("out\nmore\n");
    expect(result.stderr.toString()).toBe("err\n");
    expect(seen.join("")).toContain("e:err\n");
    expect(result.timedOut).toBe(false);
    expect(result.killed).toBe(false);
  });

  it("exec passes stdin, env and cwd, and reports 127 for a missing command", async () => {
    await ws.backend.mkdir("sub/dir");
    const result = await ws.backend.exec(["sh", "-c", 'cat; echo "$GREETING"; pwd'], {
      stdin: "from stdin\n",
      env: { GREETING: "hello" },
      cwd: "sub/dir",
    });
    expect(result.stdout.toString()).toBe("from stdin\nhello\n/workspace/sub/dir\n");
    const missing = await ws.backend.exec(["no-such-command-xyz"]);
    expect(missing.exitCode).toBe(127);
  });

  it("exec caps collected output but still streams everything to the callback", async () => {
    let streamed = 0;
    const result = await ws.backend.exec(["head", "-c", "300000", "/dev/zero"], {
      maxBufferBytes: 1000,
      onStdout: (chunk) => (streamed += chunk.length),
    });
    expect(result.stdout.length).toBe(1000);
    expect(result.truncated).toBe(true);
    expect(streamed).toBe(300000);
  });

  it("a timeout kills the whole process group, children included", async () => {
    const result = await ws.backend.exec(["sh", "-c", "sleep 300 & sleep 301; echo never"], {
      timeoutMs: 500,
    });
    expect(result.timedOut).toBe(true);
    expect(result.exitCode).toBe(-1);
    expect(result.stdout.toString()).not.toContain("never");
    const ps = await ws.backend.exec(["ps", "-eo", "args"]);
    expect(ps.stdout.toString()).not.toMatch(/sleep 30[01]/);
  });

  it("aborting kills the command", async () => {
    const controller = new AbortController();
    const running = ws.backend.exec(["sh", "-c", "echo started; sleep 300"], {
      signal: controller.signal,
      onStdout: () => controller.abort(),
    });
    const result = await running;
    expect(result.killed).toBe(true);
    expect(result.exitCode).toBe(-1);
    const ps = await ws.backend.exec(["ps", "-eo", "args"]);
    expect(ps.stdout.toString()).not.toMatch(/sleep 300/);
  });

  it("round-trips a 64 MiB file as a stream, byte for byte, and reads ranges", async () => {
    const size = 64 * 1024 * 1024;
    const chunk = randomBytes(1024 * 1024);
    const sent = createHash("sha256");
    let produced = 0;
    const source = new Readable({
      read() {
        if (produced >= size) return this.push(null);
        produced += chunk.length;
        sent.update(chunk);
        this.push(chunk);
      },
    });
    await ws.backend.writeFile("big/data.bin", source);
    expect((await ws.backend.stat("big/data.bin"))?.size).toBe(size);

    const received = createHash("sha256");
    let receivedBytes = 0;
    await pipeline(await ws.backend.readFile("big/data.bin"), async function* (stream) {
      for await (const part of stream) {
        received.update(part as Buffer);
        receivedBytes += (part as Buffer).length;
      }
      yield* [];
    });
    expect(receivedBytes).toBe(size);
    expect(received.digest("hex")).toBe(sent.digest("hex"));

    const range = await streamToBuffer(await ws.backend.readFile("big/data.bin", { start: 10, end: 19 }));
    expect(range).toEqual(chunk.subarray(10, 20));
  });

  it("maps missing paths, directories and existing names to the port's errors", async () => {
    await expect(ws.backend.readFile("nope.txt")).rejects.toMatchObject({ code: "NOT_FOUND" });
    await expect(ws.backend.readFile("sub")).rejects.toMatchObject({ code: "BAD_REQUEST" });
    await expect(ws.backend.list("nope")).rejects.toMatchObject({ code: "NOT_FOUND" });
    expect(await ws.backend.stat("nope")).toBeNull();
    expect(await ws.backend.realpath("nope")).toBeNull();

    await ws.backend.writeFile("once.txt", "first", { exclusive: true });
    await expect(ws.backend.writeFile("once.txt", "second", { exclusive: true })).rejects.toMatchObject({
      code: "CONFLICT",
    });
    expect((await streamToBuffer(await ws.backend.readFile("once.txt"))).toString()).toBe("first");
    await expect(ws.backend.readFile("/etc/shadow")).rejects.toMatchObject({ code: "FORBIDDEN" });
  });

  it("stat, list, append, move, realpath and remove behave like the local backend", async () => {
    await ws.backend.writeFile("notes/a.txt", "one\n", { mode: 0o600 });
    await ws.backend.writeFile("notes/a.txt", "two\n", { append: true });
    expect((await streamToBuffer(await ws.backend.readFile("notes/a.txt"))).toString()).toBe("one\ntwo\n");
    const stat = await ws.backend.stat("notes/a.txt");
    expect(stat).toMatchObject({ type: "file", size: 8, mode: 0o600 });
    expect(stat!.mtimeMs).toBeGreaterThan(Date.now() - 60_000);

    await ws.backend.exec(["ln", "-s", "a.txt", "notes/link"]);
    await ws.backend.writeFile("notes/with\ttab and space.txt", "x");
    const entries = await ws.backend.list("notes");
    expect(entries.map((entry) => [entry.name, entry.type]).sort()).toEqual([
      ["a.txt", "file"],
      ["link", "symlink"],
      ["with\ttab and space.txt", "file"],
    ]);
    expect(await ws.backend.realpath("notes/link")).toBe("/workspace/notes/a.txt");

    await ws.backend.move("notes/a.txt", "moved/b.txt");
    expect(await ws.backend.stat("notes/a.txt")).toBeNull();
    expect((await ws.backend.stat("moved/b.txt"))?.type).toBe("file");
    await ws.backend.remove("moved");
    await ws.backend.remove("moved"); // missing: silent no-op
    expect(await ws.backend.stat("moved")).toBeNull();
  });

  it("puts and gets tar archives as streams, owned by the workspace user", async () => {
    const pack = tar.pack();
    pack.entry({ name: "skill/SKILL.md" }, "---\nname: demo\n---\n");
    pack.entry({ name: "skill/run.sh", mode: 0o755 }, "#!/bin/sh\necho ran\n");
    pack.finalize();
    await ws.backend.putArchive("unpacked", Readable.from(pack));
    const run = await ws.backend.exec([
      "sh",
      "-c",
      "./unpacked/skill/run.sh; stat -c %u unpacked/skill/run.sh",
    ]);
    expect(run.stdout.toString()).toBe("ran\n1000\n");

    const names: string[] = [];
    const extract = tar.extract();
    extract.on("entry", (header, stream, next) => {
      names.push(header.name);
      stream.resume();
      stream.on("end", next);
    });
    await pipeline(await ws.backend.getArchive("unpacked/skill"), extract);
    expect(names.sort()).toEqual(["skill/", "skill/SKILL.md", "skill/run.sh"]);
    await expect(ws.backend.getArchive("nope")).rejects.toMatchObject({ code: "NOT_FOUND" });
  });

  it("installs a skill archive through the tar re-pack: links inside kept, owned by the workspace user", async () => {
    const pack = tar.pack();
    pack.entry({ name: "linked/SKILL.md" }, "---\nname: linked\ndescription: links\n---\n");
    pack.entry({ name: "linked/docs/guide.md" }, "the guide");
    pack.entry({ name: "linked/latest.md", type: "symlink", linkname: "docs/guide.md" });
    pack.entry({ name: "linked/copy.md", type: "link", linkname: "linked/docs/guide.md" });
    pack.finalize();
    const store = new SkillStore({ machine: ws.backend });
    await store.initialize();
    const { skill } = await store.installArchive(Readable.from(pack), "tar", "agent-links");
    expect(skill.path).toBe("/workspace/skills/agent-links/linked");
    const check = await ws.backend.exec([
      "sh",
      "-c",
      "cd skills/agent-links/linked && readlink latest.md && cat latest.md copy.md && stat -c %u docs/guide.md",
    ]);
    expect(check.stdout.toString()).toBe("docs/guide.md\nthe guidethe guide1000\n");

    const escaping = tar.pack();
    escaping.entry({ name: "bad/SKILL.md" }, "---\nname: bad\ndescription: escapes\n---\n");
    escaping.entry({ name: "bad/etc", type: "symlink", linkname: "../../../../etc" });
    escaping.finalize();
    await expect(store.installArchive(Readable.from(escaping), "tar", "agent-links")).rejects.toMatchObject({
      code: "BAD_REQUEST",
      details: { reason: "symbolic link points outside the archive" },
    });
    expect((await store.list("agent-links")).skills.map((s) => s.dir)).toEqual(["linked"]);
  });

  it("files written in the container are on the host under the bind-mounted workdir", async () => {
    await ws.backend.writeFile("host-visible.txt", "hi");
    const fs = await import("node:fs/promises");
    await vi.waitFor(async () => {
      expect(await fs.readFile(`${ws.hostWorkdir}/host-visible.txt`, "utf8")).toBe("hi");
    });
  });
});

async function streamToBuffer(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of stream) parts.push(part as Buffer);
  return Buffer.concat(parts);
}
