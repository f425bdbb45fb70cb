import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import { createServer, type Server } from "node:http";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ZDockerDriverConfig } from "@/server/workspace/drivers/docker/docker-config";
import { gatewayCredentialsPath, startDockerGateway } from "@/server/workspace/drivers/docker/docker-gateway";
import { canFallBack, GatewayFileClient } from "@/server/workspace/gateway/client/gateway-files";
import { inProcessFileService } from "@/server/workspace/gateway/server/file-worker";
import { createGatewayServer } from "@/server/workspace/gateway/server/gateway-server";
import { ScopeRegistry } from "@/server/workspace/gateway/server/scope-registry";
import { LocalMcpConnector } from "@/server/workspace/mcp/local-connector";

const TOKEN = "file-endpoint-test-token-0123456789";

describe("gateway file endpoints (in-process file service, real unix socket)", () => {
  let dir: string;
  let root: string;
  let server: Server;
  let files: GatewayFileClient;

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "berth-gw-files-"));
    root = path.join(dir, "root");
    await fs.mkdir(root);
    server = createGatewayServer({
      token: TOKEN,
      instanceNonce: "nonce",
      registry: new ScopeRegistry(new LocalMcpConnector()),
      files: inProcessFileService,
    });
    const socketPath = path.join(dir, "gw.sock");
    await new Promise<void>((resolve) => server.listen(socketPath, resolve));
    files = new GatewayFileClient({ socketPath }, TOKEN);
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await fs.rm(dir, { recursive: true, force: true });
  });

  const at = (name: string) => path.join(root, name);

  it("streams a large write and reads it back whole and by inclusive range", async () => {
    const chunk = randomBytes(256 * 1024);
    const sent = createHash("sha256");
    let left = 64;
    const source = new Readable({
      read() {
        if (left-- === 0) return this.push(null);
        sent.update(chunk);
        this.push(chunk);
      },
    });
    await files.writeFile(at("deep/dir/big.bin"), source, { mode: 0o640 });
    const stat = await files.stat(at("deep/dir/big.bin"));
    expect(stat).toMatchObject({ type: "file", size: 64 * chunk.length, mode: 0o640 });
    expect(Number.isInteger(stat!.mtimeMs)).toBe(true);
    const received = createHash("sha256");
    for await (const part of await files.readFile(at("deep/dir/big.bin"))) received.update(part as Buffer);
    expect(received.digest("hex")).toBe(sent.digest("hex"));
    expect(await text(await files.readFile(at("deep/dir/big.bin"), { start: 10, end: 19 }))).toBe(
      chunk.subarray(10, 20).toString(),
    );
    // No temporary file is left beside the target.
    expect(await fs.readdir(at("deep/dir"))).toEqual(["big.bin"]);
  });

  it("appends, refuses an exclusive create of an existing name, lists, moves, resolves and removes", async () => {
    await files.writeFile(at("notes/a.txt"), "one\n");
    await files.writeFile(at("notes/a.txt"), Buffer.from("two\n"), { append: true });
    expect(await text(await files.readFile(at("notes/a.txt")))).toBe("one\ntwo\n");
    await files.writeFile(at("notes/once.txt"), "first", { exclusive: true });
    await expect(files.writeFile(at("notes/once.txt"), "second", { exclusive: true })).rejects.toMatchObject({
      code: "CONFLICT",
    });
    expect(await fs.readFile(at("notes/once.txt"), "utf8")).toBe("first");
    await fs.symlink("a.txt", at("notes/link"));
    await fs.mkdir(at("notes/sub"));
    const entries = await files.list(at("notes"));
    expect(entries.map((entry) => [entry.name, entry.type, entry.size]).sort()).toEqual([
      ["a.txt", "file", 8],
      ["link", "symlink", 5],
      ["once.txt", "file", 5],
      ["sub", "directory", null],
    ]);
    expect(await files.realpath(at("notes/link"))).toBe(await fs.realpath(at("notes/a.txt")));
    expect((await files.stat(at("notes/link")))?.type).toBe("symlink");

    await files.move(at("notes/a.txt"), at("moved/b.txt"));
    expect(await files.stat(at("notes/a.txt"))).toBeNull();
    expect(await fs.readFile(at("moved/b.txt"), "utf8")).toBe("one\ntwo\n");
    await files.mkdir(at("made/x/y"));
    expect((await files.stat(at("made/x/y")))?.type).toBe("directory");
    await files.remove(at("moved"));
    await files.remove(at("moved"));
    expect(await files.stat(at("moved"))).toBeNull();
  });

  it("maps errors to the local backend's AppErrors", async () => {
    await files.writeFile(at("plain.txt"), "x");
    await expect(files.readFile(at("missing.txt"))).rejects.toMatchObject({ code: "NOT_FOUND" });
    await expect(files.readFile(root)).rejects.toMatchObject({ code: "BAD_REQUEST" });
    await expect(files.list(at("missing"))).rejects.toMatchObject({ code: "NOT_FOUND" });
    await expect(files.list(at("plain.txt"))).rejects.toMatchObject({ code: "BAD_REQUEST" });
    await expect(files.mkdir(at("plain.txt"))).rejects.toMatchObject({ code: "CONFLICT" });
    await expect(files.move(at("missing"), at("elsewhere"))).rejects.toMatchObject({ code: "NOT_FOUND" });
    // As `mkdir -p` in the exec script: the parent exists as a file.
    await expect(files.writeFile(at("plain.txt/under"), "x")).rejects.toMatchObject({ code: "CONFLICT" });
    expect(await files.stat(at("missing"))).toBeNull();
    expect(await files.stat(at("plain.txt/under"))).toBeNull();
    expect(await files.realpath(at("missing"))).toBeNull();
    await expect(files.stat("relative/path")).rejects.toMatchObject({ code: "BAD_REQUEST" });
    await expect(files.stat(`${root}/nul\0byte`)).rejects.toMatchObject({ code: "BAD_REQUEST" });
    for (const error of await Promise.allSettled([files.readFile(at("missing.txt"))])) {
      expect(canFallBack((error as PromiseRejectedResult).reason)).toBe(false);
    }
  });

  it("a failing source leaves neither the target nor a temporary file", async () => {
    const source = new Readable({
      read() {
        this.push(Buffer.alloc(64 * 1024));
        this.destroy(new Error("source broke"));
      },
    });
    await expect(files.writeFile(at("atomic/broken.bin"), source)).rejects.toBeDefined();
    // The gateway learns of the cut when the connection closes: wait for its temp file to go.
    await expect.poll(() => fs.readdir(at("atomic")), { timeout: 5_000 }).toEqual([]);
  });

  it("a wrong token or a missing gateway is refused before any body byte moved: the caller may fall back", async () => {
    const wrong = new GatewayFileClient({ socketPath: path.join(dir, "gw.sock") }, "wrong-token-wrong-token");
    const body = Readable.from([Buffer.from("kept for the fallback")]);
    const refused = await wrong.writeFile(at("never.txt"), body).catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: "UNAUTHORIZED" });
    expect(canFallBack(refused)).toBe(true);
    expect(await text(body)).toBe("kept for the fallback");
    expect(await fs.stat(at("never.txt")).catch(() => null)).toBeNull();

    const gone = new GatewayFileClient({ socketPath: path.join(dir, "nobody.sock") }, TOKEN);
    const unreachable = await gone.stat(root).catch((error: unknown) => error);
    expect(unreachable).toMatchObject({ code: "UNAVAILABLE" });
    expect(canFallBack(unreachable)).toBe(true);
  });
});

async function text(stream: Readable): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of stream) parts.push(part as Buffer);
  return Buffer.concat(parts).toString("utf8");
}

describe("a gateway older than the file endpoints", () => {
  it("is attached with a file client that refuses untouched, so the Docker backend keeps using exec", async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "berth-gw-old-"));
    const runtimeDir = path.join(dir, "rt");
    await fs.mkdir(runtimeDir);
    const socketPath = path.join(runtimeDir, "gateway.sock");
    // What a protocol-1 gateway answers: health only (its /files/* would be a 404 that reads "not found").
    const asked: string[] = [];
    const old = createServer((req, res) => {
      asked.push(req.url ?? "");
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ status: "ok", instance_nonce: "old-nonce", protocol: 1, pid: 1 }));
    });
    await new Promise<void>((resolve) => old.listen(socketPath, resolve));
    try {
      await fs.writeFile(
        gatewayCredentialsPath(runtimeDir),
        JSON.stringify({ token: "old-token-old-token", instanceNonce: "old-nonce" }),
      );
      const config = ZDockerDriverConfig.parse({ dataRoot: dir });
      const container = {} as never; // attaching to a healthy gateway never touches the container
      const gateway = await startDockerGateway(
        container,
        config,
        { hostRuntimeDir: runtimeDir, hostWorkdir: dir },
        { reuseToken: true },
      );
      expect((await gateway.ready).protocol).toBe(1);
      // Nor does it tunnel (protocol < 4): refused before any request, saying what to do.
      await expect(gateway.openTunnel(3000)).rejects.toMatchObject({
        code: "UNPROCESSABLE",
        details: expect.objectContaining({ reason: "gateway_predates_previews" }) as unknown,
      });
      const refused = await gateway.files.stat("/workspace/a.txt").catch((error: unknown) => error);
      expect(canFallBack(refused)).toBe(true);
      expect(asked.filter((url) => url.startsWith("/files/"))).toEqual([]);
    } finally {
      await new Promise((resolve) => old.close(resolve));
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
