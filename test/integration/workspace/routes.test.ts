import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GET as download } from "@/app/api/workspaces/[id]/files/download/route";
import { POST as uploadSkill } from "@/app/api/workspaces/[id]/skills/route";
import { getApiComposition } from "@/server/api/composition";
import { setEngine } from "@/server/engine/engine";
import { createApiKey } from "@/server/modules/api-key/api-key.service";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { freshSession, startWorkspaceHarness, type WorkspaceHarness } from "./harness";

const BASE = "http://berth.test";
const params = (id: string) => ({ params: Promise.resolve({ id }) });

describe("workspace route handlers: skill upload (multipart → engine) and signed downloads", () => {
  let h: WorkspaceHarness;
  let tenant: TestTenant;
  let other: TestTenant;
  let key: string;
  let otherKey: string;
  let workspaceId: string;

  beforeAll(async () => {
    h = await startWorkspaceHarness();
    setEngine(h.engine);
    [tenant, other] = await Promise.all([createTestTenant(), createTestTenant()]);
    const auth = getApiComposition().auth;
    key = (await createApiKey(auth, tenant.scope, { name: "routes", role: "admin" })).plainKey;
    otherKey = (await createApiKey(auth, other.scope, { name: "routes", role: "admin" })).plainKey;
    const fresh = await freshSession(tenant.scope);
    workspaceId = fresh.workspaceId;
    const { workspace } = await h.service.resolveForSession(tenant.scope, fresh.session.id);
    await workspace.backend.writeFile(path.posix.join(workspace.workdir, "report.txt"), "hello download");
  });
  afterAll(async () => {
    setEngine(undefined);
    await h.close();
  });

  function skillForm(manifest: unknown, files: [string, string][]): FormData {
    const form = new FormData();
    form.append("manifest", JSON.stringify(manifest));
    for (const [name, body] of files) form.append("files", new Blob([body]), name);
    return form;
  }

  it("installs an uploaded skill into the agent's partition and lists it", async () => {
    const skillMd = "---\nname: greet\ndescription: greets people\n---\nSay hi.\n";
    const helper = "echo hi\n";
    const form = skillForm(
      {
        entries: [
          { path: "greet/SKILL.md", size: skillMd.length },
          { path: "greet/bin/hi.sh", size: helper.length },
        ],
      },
      [
        ["SKILL.md", skillMd],
        ["hi.sh", helper],
      ],
    );
    const response = await uploadSkill(
      new Request(`${BASE}/api/workspaces/${workspaceId}/skills?agentId=agent-1`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}` },
        body: form,
      }),
      params(workspaceId),
    );
    expect(response.status).toBe(201);
    expect(await response.json()).toMatchObject({ name: "greet", deduplicated: false });
    const skills = await h.service.withWorkspace(tenant.scope, workspaceId, "test", (ws) =>
      ws.listSkills("agent-1"),
    );
    expect(skills.skills.map((s) => s.name)).toEqual(["greet"]);
  });

  it("rejects a bad manifest (422), a part larger than declared (422) and another tenant's caller (404)", async () => {
    const call = (form: FormData, bearer = key) =>
      uploadSkill(
        new Request(`${BASE}/api/workspaces/${workspaceId}/skills`, {
          method: "POST",
          headers: { authorization: `Bearer ${bearer}` },
          body: form,
        }),
        params(workspaceId),
      );
    const noSkillMd = await call(
      skillForm({ entries: [{ path: "x/readme.md", size: 2 }] }, [["readme.md", "hi"]]),
    );
    expect(noSkillMd.status).toBe(422);
    const traversal = await call(
      skillForm({ entries: [{ path: "../SKILL.md", size: 2 }] }, [["SKILL.md", "hi"]]),
    );
    expect(traversal.status).toBe(422);
    const lying = await call(
      skillForm({ entries: [{ path: "x/SKILL.md", size: 2 }] }, [["SKILL.md", "much longer"]]),
    );
    expect(lying.status).toBe(422);
    const foreign = await call(
      skillForm({ entries: [{ path: "x/SKILL.md", size: 2 }] }, [["SKILL.md", "hi"]]),
      otherKey,
    );
    expect(foreign.status).toBe(404);
  });

  it("streams a file for a valid token and refuses a token for another path, workspace or a forged one", async () => {
    const { token, url } = await h.content().downloadToken(tenant.scope, workspaceId, "report.txt");
    const ok = await download(new Request(`${BASE}${url}&download=true`), params(workspaceId));
    expect(ok.status).toBe(200);
    expect(ok.headers.get("content-disposition")).toBe("attachment; filename*=UTF-8''report.txt");
    expect(await ok.text()).toBe("hello download");

    const q = (p: string, t: string) =>
      `${BASE}/api/workspaces/${workspaceId}/files/download?path=${p}&token=${t}`;
    expect((await download(new Request(q("other.txt", token)), params(workspaceId))).status).toBe(401);
    expect((await download(new Request(q("report.txt", token)), params("another-ws"))).status).toBe(401);
    const forged = `${token.slice(0, -4)}AAAA`;
    expect((await download(new Request(q("report.txt", forged)), params(workspaceId))).status).toBe(401);
  });
});
