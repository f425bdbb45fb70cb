"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import { useTRPC } from "@/app/_trpc/client";

const GRANTABLE_ROLES = ["viewer", "member", "admin"] as const;
type GrantableRole = (typeof GRANTABLE_ROLES)[number];

const formatDate = (value: Date | null) => (value ? value.toLocaleString() : "—");

export function ApiKeysManager({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const listOptions = trpc.apiKey.list.queryOptions({ tenantSlug, includeRevoked: true });
  const keys = useQuery(listOptions);
  const [createdKey, setCreatedKey] = useState<{ name: string; plainKey: string } | null>(null);

  // Only this list changes when a key is created or revoked (and the overview's key count).
  const refresh = () =>
    Promise.all([
      queryClient.invalidateQueries({ queryKey: listOptions.queryKey }),
      queryClient.invalidateQueries({ queryKey: trpc.tenant.overview.queryKey({ tenantSlug }) }),
    ]);
  const create = useMutation(
    trpc.apiKey.create.mutationOptions({
      onSuccess: async (result) => {
        setCreatedKey({ name: result.apiKey.name ?? "", plainKey: result.plainKey });
        await refresh();
      },
    }),
  );
  const revoke = useMutation(trpc.apiKey.revoke.mutationOptions({ onSuccess: refresh }));

  function onCreate(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    setCreatedKey(null);
    const name = form.get("name");
    create.mutate({
      tenantSlug,
      name: typeof name === "string" ? name : "",
      role: form.get("role") as GrantableRole,
    });
    event.currentTarget.reset();
  }

  return (
    <>
      <section className="panel" aria-labelledby="new-key-heading">
        <h2 id="new-key-heading">New key</h2>
        <form className="form-row" onSubmit={onCreate} aria-label="Create API key">
          <label>
            Name
            <input name="name" required maxLength={64} placeholder="ci-pipeline" />
          </label>
          <label>
            Role
            <select name="role" defaultValue="member">
              {GRANTABLE_ROLES.map((role) => (
                <option key={role} value={role}>
                  {role}
                </option>
              ))}
            </select>
          </label>
          <button type="submit" disabled={create.isPending}>
            {create.isPending ? "Creating…" : "Create key"}
          </button>
        </form>
        {create.error && (
          <div className="alert error" role="alert" style={{ marginTop: 12 }}>
            {create.error.message}
          </div>
        )}
        {createdKey && (
          <div className="alert success" role="status" style={{ marginTop: 12 }} data-testid="created-key">
            Key <strong>{createdKey.name}</strong> created. Copy it now: it is shown only once.
            <div
              className="mono"
              style={{ marginTop: 6, wordBreak: "break-all" }}
              data-testid="created-key-value"
            >
              {createdKey.plainKey}
            </div>
          </div>
        )}
      </section>

      <section className="panel" aria-labelledby="keys-heading">
        <h2 id="keys-heading">Keys</h2>
        {keys.error ? (
          <div className="alert error" role="alert">
            {keys.error.message}
          </div>
        ) : !keys.data ? (
          <p className="muted">Loading…</p>
        ) : keys.data.length === 0 ? (
          <p className="muted">No keys yet.</p>
        ) : (
          <table className="data">
            <thead>
              <tr>
                <th>Name</th>
                <th>Key</th>
                <th>Role</th>
                <th>Created</th>
                <th>Last used</th>
                <th>Status</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {keys.data.map((key) => (
                <tr key={key.id} data-testid="api-key-row">
                  <td>{key.name}</td>
                  <td className="mono">{key.start ? `${key.start}…` : "—"}</td>
                  <td>{key.role}</td>
                  <td>{formatDate(key.createdAt)}</td>
                  <td>{formatDate(key.lastUsedAt)}</td>
                  <td>
                    {key.revokedAt ? (
                      <span className="badge revoked">revoked</span>
                    ) : (
                      <span className="badge">active</span>
                    )}
                  </td>
                  <td>
                    {!key.revokedAt && (
                      <button
                        type="button"
                        className="danger"
                        disabled={revoke.isPending}
                        onClick={() => revoke.mutate({ tenantSlug, apiKeyId: key.id })}
                      >
                        Revoke
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {revoke.error && (
          <div className="alert error" role="alert" style={{ marginTop: 12 }}>
            {revoke.error.message}
          </div>
        )}
      </section>
    </>
  );
}
