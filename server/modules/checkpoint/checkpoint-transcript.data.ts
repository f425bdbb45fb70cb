import type { Prisma } from "@/generated/prisma/client";
import type { TenantScope } from "@/server/auth/scope";

/**
 * A fork's transcript: the source session's messages up to the end of the checkpoint's turn, in order,
 * leaving out turns a revert undid. Copies keep their order and times; they belong to no turn of the fork.
 */
export async function copyTranscriptUntil(
  scope: TenantScope,
  input: { from: string; to: string; turnId: string | null },
  tx: Prisma.TransactionClient,
): Promise<number> {
  const turn = input.turnId
    ? await tx.chatTurn.findFirst({
        where: { tenantId: scope.tenantId, id: input.turnId, sessionId: input.from },
        select: { startedAt: true },
      })
    : null;
  // The turns it includes: up to and including the checkpoint's, none that a revert undid.
  const included = new Set(
    (
      await tx.chatTurn.findMany({
        where: {
          tenantId: scope.tenantId,
          sessionId: input.from,
          revertedAt: null,
          ...(turn ? { startedAt: { lte: turn.startedAt } } : {}),
        },
        select: { id: true },
      })
    ).map((row) => row.id),
  );
  const lastOfTurn = input.turnId
    ? await tx.chatMessage.findFirst({
        where: { tenantId: scope.tenantId, sessionId: input.from, turnId: input.turnId },
        orderBy: [{ createdAt: "desc" }],
        select: { createdAt: true },
      })
    : null;
  const messages = await tx.chatMessage.findMany({
    where: {
      tenantId: scope.tenantId,
      sessionId: input.from,
      ...(lastOfTurn ? { createdAt: { lte: lastOfTurn.createdAt } } : {}),
    },
    orderBy: [{ createdAt: "asc" }, { id: "asc" }],
    select: { role: true, content: true, toolCalls: true, turnId: true, createdAt: true },
  });
  const kept = messages.filter((message) => message.turnId === null || included.has(message.turnId));
  await tx.chatMessage.createMany({
    data: kept.map((message) => ({
      tenantId: scope.tenantId,
      sessionId: input.to,
      role: message.role,
      content: message.content as Prisma.InputJsonValue,
      toolCalls: message.toolCalls ?? undefined,
      createdAt: message.createdAt,
    })),
  });
  await tx.session.update({
    where: { id: input.to },
    data: {
      forkedFromSessionId: input.from,
      forkedFromTurnId: input.turnId,
      lastMessageAt: kept.at(-1)?.createdAt ?? null,
    },
  });
  return kept.length;
}
