import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  MCP_NOT_PERSISTED,
  mcpNotPersisted,
  parseMcpFile,
  readMcpFile,
  scopeKey,
  serializeMcpFile,
  writeMcpFile,
  type McpSpecs,
} from "@/server/workspace/mcp/mcp-file";
import { ZMcpDeclaration, type EngineLogger } from "@/server/workspace/mcp/types";
import { fsError, HostFolderMachine } from "@/server/workspace/drivers/host-folder/host-folder-machine";

function recordingLogger(): EngineLogger & { warnings: string[] } {
  const warnings: string[] = [];
  return { warnings, warn: (_details, message) => warnings.push(message) };
}

const browser = ZMcpDeclaration.parse({
  name: "browser",
  is_stateful: true,
  mcp_config: { type: "stdio_mcp", command: "npx", args: ["@playwright/mcp"] },
});
const search = ZMcpDeclaration.parse({
  name: "search",
  is_stateful: false,
  mcp_config: { type: "http_mcp", url: "https://example.com/mcp", headers: { Authorization: "Bearer x" } },
  enable_tools: ["query"],
  execution_timeout: 12.5,
});

// Byte-exact: what the reference's json.dumps(indent=2) writes, modulo Python's "30.0" for whole floats
// (JSON.stringify writes 30; both parse to the same number).
const EXPECTED_V2 = `{
  "version": 2,
  "mcps": {
    "agent-1": {
      "session-1": [
        {
          "name": "browser",
          "is_stateful": true,
          "mcp_config": {
            "type": "stdio_mcp",
            "command": "npx",
            "args": [
              "@playwright/mcp"
            ],
            "env": null,
            "cwd": null,
            "encoding_error_handler": "strict"
          },
          "enable_tools": null,
          "disable_tools": null,
          "execution_timeout": null
        },
        {
          "name": "search",
          "is_stateful": false,
          "mcp_config": {
            "type": "http_mcp",
            "url": "https://example.com/mcp",
            "headers": {
              "Authorization": "Bearer x"
            },
            "timeout": 30
          },
          "enable_tools": [
            "query"
          ],
          "disable_tools": null,
          "execution_timeout": 12.5
        }
      ],
      "": []
    },
    "42": {
      "s": []
    }
  }
}`;

function specsOf(entries: Array<[string, string, unknown[]]>): McpSpecs {
  const specs: McpSpecs = new Map();
  for (const [agentId, sessionId, declarations] of entries) {
    specs.set(scopeKey({ agentId, sessionId }), {
      scope: { agentId, sessionId },
      declarations: declarations.map((d) => ZMcpDeclaration.parse(d)),
    });
  }
  return specs;
}

describe(".mcp file format", () => {
  it("writes v2 byte-exactly, in reference field order, keeping empty lists and integer-like ids in place", () => {
    const specs = specsOf([
      ["agent-1", "session-1", [browser, search]],
      ["agent-1", "", []],
      ["42", "s", []],
    ]);
    expect(serializeMcpFile(specs)).toBe(EXPECTED_V2);
  });

  it("matches JSON.stringify(x, null, 2) for ordinary ids", () => {
    const specs = specsOf([["a", "b", [search]]]);
    const viaStringify = JSON.stringify(
      { version: 2, mcps: { a: { b: [ZMcpDeclaration.parse(search)] } } },
      null,
      2,
    );
    expect(serializeMcpFile(specs)).toBe(viaStringify);
  });

  it("round-trips v2: parse(serialize(x)) is x and re-serialises to the same bytes", () => {
    const logger = recordingLogger();
    const parsed = parseMcpFile(EXPECTED_V2, logger);
    expect(logger.warnings).toEqual([]);
    // JSON.parse hoists integer-like keys ("42"), so on read such an agent comes first; every other id
    // keeps the file's order, which is what the byte-exact re-serialisation below checks.
    expect([...parsed.values()].map((entry) => entry.scope)).toEqual([
      { agentId: "42", sessionId: "s" },
      { agentId: "agent-1", sessionId: "session-1" },
      { agentId: "agent-1", sessionId: "" },
    ]);
    expect(parsed.get(scopeKey({ agentId: "agent-1", sessionId: "session-1" }))?.declarations).toEqual([
      browser,
      search,
    ]);
    parsed.delete(scopeKey({ agentId: "42", sessionId: "s" }));
    const withoutNumericId = specsOf([
      ["agent-1", "session-1", [browser, search]],
      ["agent-1", "", []],
    ]);
    expect(serializeMcpFile(parsed)).toBe(serializeMcpFile(withoutNumericId));
  });

  it("reads a v1 top-level list into the legacy scope and writes it back as v2", () => {
    const v1 = JSON.stringify([browser, search]);
    const parsed = parseMcpFile(v1, recordingLogger());
    expect([...parsed.keys()]).toEqual([scopeKey({ agentId: "", sessionId: "" })]);
    const text = serializeMcpFile(parsed);
    expect(JSON.parse(text)).toEqual({ version: 2, mcps: { "": { "": [browser, search] } } });
  });

  it("skips invalid entries one by one and keeps the valid ones (reference #1817)", () => {
    const logger = recordingLogger();
    const text = JSON.stringify({
      version: 2,
      mcps: {
        a: {
          s: [
            browser,
            { name: "bad name!", is_stateful: true, mcp_config: browser.mcp_config },
            { ...search, is_stateful: true, mcp_config: { type: "stdio_mcp", command: "x" }, name: "ok2" },
            { name: "stateless-stdio", is_stateful: false, mcp_config: { type: "stdio_mcp", command: "x" } },
            { ...search, enable_tools: ["a"], disable_tools: ["a"] },
            browser,
          ],
          notalist: { x: 1 },
        },
        b: "not an object",
      },
    });
    const parsed = parseMcpFile(text, logger);
    expect([...parsed.keys()]).toEqual([scopeKey({ agentId: "a", sessionId: "s" })]);
    expect(parsed.get(scopeKey({ agentId: "a", sessionId: "s" }))?.declarations.map((d) => d.name)).toEqual([
      "browser",
      "ok2",
    ]);
    expect(logger.warnings).toHaveLength(4);
  });

  it("ignores malformed JSON and unknown shapes", () => {
    expect(parseMcpFile("{not json", recordingLogger()).size).toBe(0);
    expect(parseMcpFile('"a string"', recordingLogger()).size).toBe(0);
    expect(parseMcpFile('{"version": 2}', recordingLogger()).size).toBe(0);
  });
});

describe(".mcp through a backend", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "berth-mcp-file-"));
  });
  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it("writes atomically (no temp file left) and reads back the same specs", async () => {
    const backend = new HostFolderMachine({ workdir: dir });
    const specs = specsOf([["agent-1", "session-1", [browser, search]]]);
    await writeMcpFile(backend, ".mcp", specs, recordingLogger());
    expect(await fs.readdir(dir)).toEqual([".mcp"]);
    const restored = await readMcpFile(backend, ".mcp", recordingLogger());
    expect(serializeMcpFile(restored)).toBe(serializeMcpFile(specs));
  });

  it("returns no specs for a missing file, and a write that fails is a typed error (nothing left behind)", async () => {
    const backend = new HostFolderMachine({ workdir: dir });
    expect((await readMcpFile(backend, ".mcp", recordingLogger())).size).toBe(0);
    // A directory squatting on the target makes the final move fail.
    await fs.mkdir(path.join(dir, ".mcp", "occupied"), { recursive: true });
    const logger = recordingLogger();
    await expect(writeMcpFile(backend, ".mcp", specsOf([["a", "b", []]]), logger)).rejects.toMatchObject({
      code: "UNAVAILABLE",
      details: { reason: MCP_NOT_PERSISTED },
    });
    expect(logger.warnings).toEqual(["Failed to save .mcp; the change is refused"]);
    expect((await fs.readdir(dir)).sort()).toEqual([".mcp"]);
  });

  it("names a refusing filesystem (EROFS) as a 4xx a retry cannot fix, and an outage as a retryable 503", () => {
    const erofs = Object.assign(new Error("EROFS: read-only file system, open '/w/.mcp.lock'"), {
      code: "EROFS",
    });
    // As the local backend reports it (details.errno), and as a raw errno error.
    for (const cause of [fsError(erofs, "/workspace/.mcp.lock"), erofs]) {
      const error = mcpNotPersisted("/workspace/.mcp", cause);
      expect(error).toMatchObject({
        code: "UNPROCESSABLE",
        details: { reason: MCP_NOT_PERSISTED, errno: "EROFS", file: ".mcp" },
      });
      expect(error.isRetryable).toBe(false);
      expect(error.userMessage).toContain("failed with EROFS (read-only file system)");
    }
    expect(mcpNotPersisted("/workspace/.mcp", new Error("socket hang up"))).toMatchObject({
      code: "UNAVAILABLE",
      details: { reason: MCP_NOT_PERSISTED },
    });
  });
});
