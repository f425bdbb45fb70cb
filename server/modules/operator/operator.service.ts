import type { z } from "zod";
import { AppError } from "@/server/shared/errors";
import { parseInput } from "@/server/shared/parse-input";
import {
  appendOperatorAudit,
  deleteOperatorUnlessLast,
  findUserIdByEmail,
  insertOperator,
  listOperatorAudit,
  listOperators,
} from "@/server/modules/operator/operator.data";
import {
  operatorActorLabel,
  operatorAuditActor,
  type OperatorActor,
} from "@/server/modules/operator/operator-actor";
import { ZOperatorGrantRequest } from "@/server/modules/operator/operator.types";
import { listTenantDeletionReceipts } from "@/server/modules/operator/tenant-deletion.data";
import type { Db } from "@/server/db";

/** The operator role: granted by operators (or the CLI), revoked likewise, never from the last operator. */

async function requireUserId(email: string, db: Db): Promise<string> {
  const userId = await findUserIdByEmail(email, db);
  if (!userId) {
    throw new AppError("NOT_FOUND", `no user ${email}`, {
      userMessage: `No account with the email ${email}. The person signs up (or accepts an invitation) first.`,
    });
  }
  return userId;
}

export async function grantOperator(
  actor: OperatorActor,
  raw: z.input<typeof ZOperatorGrantRequest>,
  db: Db,
): Promise<{ userId: string; granted: boolean }> {
  const { email } = parseInput(ZOperatorGrantRequest, raw);
  const userId = await requireUserId(email, db);
  const granted = await insertOperator(userId, operatorActorLabel(actor), db);
  if (granted) {
    await appendOperatorAudit(
      {
        actor: operatorAuditActor(actor),
        action: "operator.grant",
        targetType: "operator",
        targetId: userId,
        targetLabel: email,
        outcome: "success",
      },
      db,
    );
  }
  return { userId, granted };
}

export async function revokeOperator(
  actor: OperatorActor,
  raw: z.input<typeof ZOperatorGrantRequest>,
  db: Db,
): Promise<{ userId: string }> {
  const { email } = parseInput(ZOperatorGrantRequest, raw);
  const userId = await requireUserId(email, db);
  const outcome = await deleteOperatorUnlessLast(userId, db);
  if (outcome === "not-operator") {
    throw new AppError("NOT_FOUND", `${email} is not an operator`, {
      userMessage: `${email} is not an operator.`,
    });
  }
  if (outcome === "last") {
    await appendOperatorAudit(
      {
        actor: operatorAuditActor(actor),
        action: "operator.revoke",
        targetType: "operator",
        targetId: userId,
        targetLabel: email,
        outcome: "failure",
        details: { reason: "last_operator" },
      },
      db,
    );
    throw new AppError("CONFLICT", `${email} is the last operator`, {
      userMessage: `${email} is the last operator: grant the role to someone else first.`,
      details: { reason: "last_operator" },
    });
  }
  await appendOperatorAudit(
    {
      actor: operatorAuditActor(actor),
      action: "operator.revoke",
      targetType: "operator",
      targetId: userId,
      targetLabel: email,
      outcome: "success",
    },
    db,
  );
  return { userId };
}

/** Makes the first admin of a fresh installation an operator (`npm start`'s bootstrap). */
export async function grantBootstrapOperator(userId: string, db: Db): Promise<void> {
  if (await insertOperator(userId, "bootstrap", db)) {
    await appendOperatorAudit(
      {
        actor: { type: "system", id: "bootstrap" },
        action: "operator.grant",
        targetType: "operator",
        targetId: userId,
        outcome: "success",
      },
      db,
    );
  }
}

export function listOperatorsFor(_actor: OperatorActor, db: Db) {
  return listOperators(db);
}

export function readOperatorAudit(
  _actor: OperatorActor,
  filter: { targetId?: string; limit?: number },
  db: Db,
) {
  return listOperatorAudit({ targetId: filter.targetId, limit: Math.min(filter.limit ?? 100, 500) }, db);
}

export function readTenantDeletionReceipts(_actor: OperatorActor, limit = 50, db: Db) {
  return listTenantDeletionReceipts(Math.min(limit, 500), db);
}
