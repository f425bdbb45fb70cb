"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent } from "react";
import { toast } from "sonner";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import { Card, CardContent } from "@/app/_components/ui/card";
import { ConfirmDialog } from "@/app/_components/ui/confirm-dialog";
import { formString } from "@/app/_components/ui/form-data";
import { Input } from "@/app/_components/ui/input";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { resetErrorOnEdit, useSubmitOnce } from "@/app/_components/ui/use-submit-once";
import { useTRPC } from "@/app/_trpc/client";

export function OperatorsPanel() {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const operators = useQuery(trpc.operator.operators.list.queryOptions());
  const refresh = () => queryClient.invalidateQueries({ queryKey: trpc.operator.pathKey() });
  const grant = useMutation(
    trpc.operator.operators.grant.mutationOptions({
      onSuccess: async ({ granted }) => {
        toast.success(granted ? "Operator role granted." : "Already an operator.");
        await refresh();
      },
      onError: (error) => toast.error(error.message),
    }),
  );
  const revoke = useMutation(
    trpc.operator.operators.revoke.mutationOptions({
      onSuccess: async () => {
        toast.success("Operator role revoked.");
        await refresh();
      },
      onError: (error) => toast.error(error.message),
    }),
  );

  const submitOnce = useSubmitOnce();

  function onSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = event.currentTarget;
    submitOnce(() =>
      grant.mutateAsync({ email: formString(new FormData(form), "email") }).then(() => form.reset()),
    );
  }

  if (operators.error) return <Alert>{operators.error.message}</Alert>;
  return (
    <Card>
      <CardContent className="grid gap-4 pt-5">
        <form
          className="flex flex-wrap gap-2"
          onSubmit={onSubmit}
          onChange={resetErrorOnEdit(grant)}
          aria-label="Grant the operator role"
        >
          <Input
            name="email"
            type="email"
            required
            placeholder="email of an existing account"
            className="max-w-xs"
          />
          <Button type="submit" size="sm" disabled={grant.isPending}>
            Grant operator
          </Button>
        </form>
        <ul className="divide-y text-sm">
          {(operators.data ?? []).map((operator) => (
            <li key={operator.userId} className="flex items-center gap-3 py-2" data-testid="operator-row">
              <span className="min-w-0 flex-1 truncate font-medium">{operator.email ?? operator.userId}</span>
              <span className="text-muted-foreground text-xs">
                granted by {operator.grantedBy} · <RelativeTime value={operator.createdAt} />
              </span>
              {operator.email && (
                <ConfirmDialog
                  trigger={
                    <Button variant="outline" size="sm">
                      Revoke
                    </Button>
                  }
                  title={`Revoke ${operator.email}?`}
                  description="They keep their tenant memberships but can no longer run tenants."
                  confirmLabel="Revoke"
                  destructive
                  onConfirm={() => revoke.mutate({ email: operator.email! })}
                />
              )}
            </li>
          ))}
        </ul>
      </CardContent>
    </Card>
  );
}
