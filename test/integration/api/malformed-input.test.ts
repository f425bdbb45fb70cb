/**
 * Malformed input to EVERY procedure, over real HTTP as a hostile or careless caller sends it (no typed
 * client): wrong types, wrong shapes, out-of-range numbers, over-long strings. Each call must be answered
 * with a typed 4xx (or succeed where the input happens to be acceptable), never a 500: a 500 means a
 * boundary let something through that the code behind it could not handle. The caller is an admin key of a
 * tenant of this file's own, so a mutation that does accept an input harms no other test.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiRuntime } from "@/server/api/context";
import { handleTrpcRequest } from "@/server/api/http-handler";
import { startWorkspaceHarness, type WorkspaceHarness } from "../workspace/harness";
import { createTestApiRuntime } from "./support/api-test-runtime";
import { allProcedurePaths, procedureType } from "./support/call-by-path";
import { rawTrpcCall } from "./support/raw-trpc";
import { serveFetchHandler, type ServedHandler } from "./support/serve-fetch-handler";
import { createTenantFixture, type TenantFixture } from "./support/tenant-fixtures";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { installTestBerth } from "@/test/setup/test-berth";

let h: WorkspaceHarness;
let runtime: ApiRuntime;
let server: ServedHandler;
let t: TenantFixture;

beforeAll(async () => {
  h = await startWorkspaceHarness();
  await installTestBerth({ engine: h.engine });
  runtime = createTestApiRuntime();
  server = await serveFetchHandler((req) => handleTrpcRequest(req, runtime));
  t = await createTenantFixture(runtime, "malformed");
});

afterAll(async () => {
  await closeProcessBerth();
  await server.close();
  await h.close();
});

/** Inputs no procedure's schema should accept as they are, each shaped like a common mistake. */
function malformedInputs(tenantId: string, type: "query" | "mutation"): [label: string, input: unknown][] {
  // A query's input travels in the URL, which Node caps with the other headers at 16 KiB (a 431).
  const long = "x".repeat(type === "query" ? 1_200 : 70_000);
  return [
    ["null", null],
    ["a string", "tenant"],
    ["an array", [tenantId, 1, 2]],
    ["a number", 42],
    ["tenantId of the wrong type", { tenantId: 42 }],
    ["an unknown tenant", { tenantId: "00000000-0000-7000-8000-000000000000" }],
    [
      "every common field of the wrong type",
      {
        tenantId,
        id: 7,
        agentId: [],
        sessionId: {},
        workspaceId: true,
        name: { first: "a" },
        path: 12,
        limit: "many",
        cursor: -1,
        role: "superuser",
        enabled: "yes",
      },
    ],
    [
      "out-of-range and over-long values",
      {
        tenantId,
        id: long,
        agentId: long,
        sessionId: long,
        workspaceId: long,
        name: long,
        path: long,
        message: long,
        limit: -5,
        offset: Number.MAX_SAFE_INTEGER,
        cursor: long,
        url: "javascript:alert(1)",
        since: "not a date",
      },
    ],
  ];
}

describe("malformed input to every procedure", () => {
  it("is a typed 4xx (or accepted), never a 500", async () => {
    const headers = { authorization: `Bearer ${t.adminKey.plainKey}` };
    const fiveHundreds: string[] = [];
    let calls = 0;
    for (const path of allProcedurePaths()) {
      const type = procedureType(path);
      // A subscription answers 200 and streams; its input errors are covered by hostile-input.test.ts.
      if (type === "subscription") continue;
      for (const [label, input] of malformedInputs(t.tenant.id, type)) {
        const answer = await rawTrpcCall(server.url, path, type, input, headers).catch((error: unknown) => {
          throw new Error(`${path} (${label}): ${String(error)}`, { cause: error });
        });
        calls += 1;
        if (answer.status >= 500)
          fiveHundreds.push(`${path} (${label}): ${answer.status} ${answer.text.slice(0, 200)}`);
        else if (answer.status >= 400) {
          const code = /"data":\{"code":"([A-Z_]+)"/.exec(answer.text)?.[1];
          expect(code, `${path} (${label}): ${answer.status} ${answer.text.slice(0, 200)}`).toBeDefined();
        }
      }
    }
    expect(calls).toBeGreaterThan(100);
    expect(fiveHundreds).toEqual([]);
  });
});
