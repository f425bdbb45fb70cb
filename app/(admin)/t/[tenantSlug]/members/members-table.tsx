"use client";

import { useQuery } from "@tanstack/react-query";
import { useTRPC } from "@/app/_trpc/client";

export function MembersTable({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const members = useQuery(trpc.member.list.queryOptions({ tenantSlug }));
  if (members.error) {
    return (
      <div className="alert error" role="alert">
        {members.error.message}
      </div>
    );
  }
  if (!members.data) return <p className="muted">Loading…</p>;
  return (
    <div className="panel">
      <table className="data">
        <thead>
          <tr>
            <th>Name</th>
            <th>Email</th>
            <th>Role</th>
            <th>Joined</th>
          </tr>
        </thead>
        <tbody>
          {members.data.map((member) => (
            <tr key={member.userId}>
              <td>{member.name}</td>
              <td>{member.email}</td>
              <td>
                <span className="badge">{member.role}</span>
              </td>
              <td>{member.joinedAt.toLocaleDateString()}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
