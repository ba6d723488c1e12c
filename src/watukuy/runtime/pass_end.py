"""The end of a full-listing pass: what the delete policy needs read, and what it decided
written.

When the last page of a pass is listed, :meth:`PassEnd.end` counts the rows the pass missed,
walks the links of the missed rows for proofs of absence, and asks
:mod:`watukuy.pipeline.deletes` what to do: wait, hold (the mass-delete guard, or deletes no
pass could prove), or emit. It then emits the deletes through the same path as a page's
events (one committed batch at a time, then the dispatcher), fires the hooks, logs, and
stores the closed pass. :meth:`PassEnd.release_held` emits the deletes an operator
confirmed. Neither needs a lane cycle: a store, a key, a lease, a clock, the poller, an
:class:`~watukuy.pipeline.events.EventMaker` for the ``deleted`` events, and the path that
commits and hands them over (:class:`DeletePath`) are enough.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from watukuy.model.events import Event, WrittenEvent, WrittenPage
from watukuy.model.options import Deletes
from watukuy.model.ports import Clock, StateStore
from watukuy.model.records import dataclass
from watukuy.model.rows import (
    BRIDGE_LIMIT,
    PROVEN_LIMIT,
    UNPROVEN_PASSES,
    CommitBatch,
    HeldDeletes,
    ItemMark,
    ItemRow,
    Lane,
    ListingLink,
    ListingPass,
    ListingState,
    OutboxRow,
    PKey,
    PollerState,
    StatePatch,
    apply_patch,
)
from watukuy.pipeline import deletes as policy
from watukuy.pipeline.deletes import Bridge, PassClose
from watukuy.pipeline.events import EventMaker

from ._hookbus import HookEmitter
from .context import FetchContext
from .lease import LeaseKeeper
from .page_build import report_commit
from .poller import PollerDefinition

if TYPE_CHECKING:
    from .deliveries import Deliveries
    from .scope import KeyScope

__all__ = ["DeletePath", "PassEnd"]

# Identities read or written per store call.
_IDENTITY_BATCH = 1000
# Complete passes in a row that disagreed before the first WARNING about it.
_DISAGREEMENT_WARNING = 3

Observed = list[Event[Any]] | None


@dataclass(frozen=True, slots=True)
class DeletePath:
    """How ``deleted`` events are committed and handed over: the path a page's events take.

    Attributes:
        commit: ``(batch, observed, deletes)``: commit a batch under the lease and fire its
            hooks.
        deliver: ``(rows, page)``: hand the committed events over to the dispatcher.
    """

    commit: Callable[[CommitBatch, Observed, int], Awaitable[None]]
    deliver: Callable[[list[OutboxRow], WrittenPage], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class _Closed:
    """How a pass closes (see :meth:`PassEnd.end`).

    Attributes:
        state: The key's state, with the sequence of the deletes emitted.
        found: The pass with what it found (its in-progress fields still set).
        held: The key's hold of deletes.
        emitted: The ``deleted`` events emitted.
        outcome: What the pass did with deletes, in words.
    """

    state: PollerState
    found: ListingPass
    held: HeldDeletes | None
    emitted: int
    outcome: str


@dataclass(frozen=True, slots=True)
class _Verdict:
    """What the confirming passes led to (see :meth:`PassEnd._confirm`)."""

    state: PollerState
    emitted: int
    held: HeldDeletes | None
    outcome: str
    disagreed: int
    missed: int | None
    proven: tuple[str, ...]
    unproven: int
    bridges: tuple[Bridge, ...]


class PassEnd:
    """Ends the full-listing passes of one lane of one key (see the module docstring).

    Args:
        store: The state store.
        key: The key.
        lane: The lane whose passes end (for a release, the lane of the hold).
        keeper: The lease the writes are made under.
        clock: The engine's clock.
        poller: The poller (its ``deletes`` rules, ``log`` and ``retain_payload``).
        hooks: The hooks of the key and lane (``on_deletes_held``, ``on_event``).
        logger: The key's logger.
        events: Makes the ``deleted`` events (the lane's event maker).
        path: How the ``deleted`` events are committed and handed over.
        context: The ``FetchContext`` handed to ``Deletes(verify=)``.
    """

    def __init__(
        self,
        *,
        store: StateStore,
        key: PKey,
        lane: Lane,
        keeper: LeaseKeeper,
        clock: Clock,
        poller: PollerDefinition[Any],
        hooks: HookEmitter,
        logger: logging.Logger | logging.LoggerAdapter[logging.Logger],
        events: EventMaker,
        path: DeletePath,
        context: Callable[[], FetchContext[Any]],
    ) -> None:
        self._store = store
        self._key = key
        self._lane = lane
        self._keeper = keeper
        self._clock = clock
        self._poller = poller
        self._rules: Deletes = poller.deletes
        self._hooks = hooks
        self._logger = logger
        self._events = events
        self._path = path
        self._context = context

    @classmethod
    def of(
        cls,
        scope: KeyScope,
        lane: Lane,
        deliveries: Deliveries,
        *,
        events: EventMaker,
        context: Callable[[], FetchContext[Any]],
    ) -> PassEnd:
        """The pass end of ``lane`` in a key run: its deletes commit under the run's lease,
        fire the lane's hooks and go to the run's ``deliveries``."""
        deps, keeper, hooks = scope.deps, scope.keeper, scope.hooks(lane)

        async def commit(batch: CommitBatch, observed: Observed, deletes: int) -> None:
            started = deps.clock.now()
            await deps.store.commit_poll(scope.key, keeper.lease, batch)
            duration_ms = deps.clock.now() - started
            await report_commit(hooks, batch, observed, deletes=deletes, duration_ms=duration_ms)

        return cls(
            store=deps.store,
            key=scope.key,
            lane=lane,
            keeper=keeper,
            clock=deps.clock,
            poller=scope.poller,
            hooks=hooks,
            logger=scope.logger,
            events=events,
            path=DeletePath(commit=commit, deliver=deliveries.deliver),
            context=context,
        )

    # --- the end of a pass ------------------------------------------------------------------

    async def end(
        self,
        state: PollerState,
        progress: ListingPass,
        close: Callable[[ListingPass], ListingState],
    ) -> tuple[PollerState, int]:
        """Every page of the pass ``progress`` is listed: emit (or hold) its deletes, then
        close it.

        Args:
            state: The key's state.
            progress: The pass.
            close: The listing state that stores the pass closed, given the pass with what
                it found (the lane drops what a pass in progress has of its own).

        Returns:
            The state saved, and how many ``deleted`` events went out.
        """
        pass_id = progress.pass_id
        assert pass_id is not None
        now = self._clock.now()
        if not progress.listed:
            # A generator's listing ends when it is exhausted, after its last page's commit.
            progress = dataclasses.replace(progress, listed=True)
        closing = policy.close_pass(progress, pass_id, self._rules)
        if closing.incomplete is not None:
            self._logger.info("full listing pass %d: %s", pass_id, closing.incomplete)
            found = dataclasses.replace(progress, last_clean=False)
            closed = _Closed(state, found, state.held_deletes, 0, closing.incomplete)
        else:
            closed = await self._complete(state, progress, pass_id, closing, now)
        ended = dataclasses.replace(
            closed.found,
            completed=progress.completed + 1,
            last_completed_at=now,
            last_outcome=closed.outcome,
            bridges=closed.found.bridges[-BRIDGE_LIMIT:],
        )
        patch: StatePatch = {
            "listing": close(ended),
            "held_deletes": closed.held,
            "updated_at": now,
        }
        await self._store.save_state(self._key, self._keeper.lease, patch)
        return apply_patch(closed.state, patch), closed.emitted

    async def _complete(
        self, state: PollerState, progress: ListingPass, pass_id: int, closing: PassClose, now: int
    ) -> _Closed:
        """A complete listing: count, prove, and confirm its deletes."""
        rules = self._rules
        clean = closing.clean
        missed = await self._count_unseen(clean[-1]) if closing.judge else None
        if closing.judge and not closing.repeat:
            assert missed is not None
            listed = await self._store.count_items(self._key) - missed
            repeats: int | None = max(progress.items - listed, 0)
        else:
            repeats = progress.last_repeats if closing.repeat else None
        proven, note, kept = progress.proven, "", progress.bridges
        if rules.proves and not closing.repeat:
            proven, note, kept = await self._prove(progress, pass_id, missed)
        found = dataclasses.replace(
            progress,
            clean=clean,
            last_clean=True,
            history=closing.history,
            last_missed=missed,
            last_repeats=repeats,
            proven=proven,
            bridges=kept,
        )
        if len(clean) < rules.confirm_passes:
            outcome = policy.not_yet_outcome(len(clean), rules.confirm_passes)
            return _Closed(state, found, state.held_deletes, 0, outcome + note)
        verdict = await self._confirm(state, progress, closing, missed, proven, now)
        found = dataclasses.replace(
            found,
            last_missed=verdict.missed,
            disagreed=verdict.disagreed,
            proven=verdict.proven,
            unproven=verdict.unproven,
            bridges=(*kept, *verdict.bridges),
        )
        return _Closed(verdict.state, found, verdict.held, verdict.emitted, verdict.outcome + note)

    async def _confirm(
        self,
        state: PollerState,
        progress: ListingPass,
        closing: PassClose,
        missed: int | None,
        proven: tuple[str, ...],
        now: int,
    ) -> _Verdict:
        """Enough complete passes confirm: wait for passes that agree, hold, or emit."""
        rules = self._rules
        below, newest = closing.clean[0], closing.clean[-1]
        count, why = await self._agreement(progress, closing, missed)
        held = state.held_deletes  # another lane's hold stays as it is
        disagreed = progress.disagreed
        only: dict[str, int] | None = None  # proven candidates and their marks
        if why is not None:
            disagreed += 1
            held = await self._recount_held(held)
            if rules.proves:
                only = await self._marks_below(proven, below)
        ours = policy.own_hold(held, self._lane, "guard")
        emitted, bridges = 0, tuple[Bridge, ...]()
        if why is not None and not only:
            outcome = policy.waiting_outcome(why, count, proves=rules.proves)
            self._report_disagreement(disagreed, outcome)
        else:
            if why is None:
                disagreed = 0
            new = await self._newly_lost(count if only is None else len(only), only, closing, ours)
            snapshot = await self._store.count_items(self._key)
            hold = policy.guard(
                rules,
                lane=self._lane,
                below=below,
                count=count,
                new=new,
                snapshot=snapshot,
                ours=ours,
                now=now,
            )
            if hold is not None:
                held = hold
                outcome = policy.held_outcome(count, snapshot)
                await self._report_held(held)
            else:
                chosen = None if only is None else set(only)
                state, emitted, bridges = await self._emit_deletes(
                    state, below, proved_by=newest, only=chosen
                )
                if ours is not None:
                    held = None
                outcome = policy.deleted_outcome(emitted, count, why)
                if why is not None:
                    self._report_disagreement(disagreed, outcome)
                if emitted and missed is not None:
                    missed = await self._count_unseen(newest)
        if emitted:
            proven = await self._still_missed(proven, newest)
        # The hold before this pass (one it dropped included) tells how long it has lasted.
        held, unproven, note = await self._hold_unproven(
            state.held_deletes, held, closing, progress.unproven, now
        )
        return _Verdict(
            state=state,
            emitted=emitted,
            held=held,
            outcome=outcome + note,
            disagreed=disagreed,
            missed=missed,
            proven=proven,
            unproven=unproven,
            bridges=bridges,
        )

    async def _agreement(
        self, progress: ListingPass, closing: PassClose, missed: int | None
    ) -> tuple[int, str | None]:
        """The deletes the confirming passes have (below the oldest), and why the newest two
        disagree (``None``: they agree, or it decides nothing)."""
        clean = closing.clean
        count = await self._count_unseen(clean[0])
        if not (closing.judge and count):  # with nothing to delete, agreement decides nothing
            return count, None
        assert missed is not None
        older = clean[-2]
        still = count if older == clean[0] else await self._count_unseen(older)
        why = policy.disagreement(
            older,
            clean[-1],
            last_missed=progress.last_missed,
            last_repeats=progress.last_repeats,
            missed=missed,
            still=still,
        )
        return count, why

    async def _newly_lost(
        self,
        deletable: int,
        only: dict[str, int] | None,
        closing: PassClose,
        ours: HeldDeletes | None,
    ) -> int:
        """What this pass newly lost of the ``deletable`` rows, for the guard: the rows
        already candidates at the previous end of a pass are left out, unless a hold of the
        guard is in place (it keeps being judged whole)."""
        before = closing.before
        if ours is not None or before is None:
            return deletable
        if only is None:
            return deletable - await self._count_unseen(before)
        return deletable - sum(1 for seen in only.values() if seen < before)

    async def _hold_unproven(
        self,
        prior: HeldDeletes | None,
        held: HeldDeletes | None,
        closing: PassClose,
        before: int,
        now: int,
    ) -> tuple[HeldDeletes | None, int, str]:
        """The hold of what every pass of the history missed and nothing proved, judged
        again at each end of a pass; ``prior`` is the hold before this pass, ``before`` the
        unproven deletes the previous end of a pass counted. Returns the hold, the unproven
        deletes, and the note for the outcome (empty: none held)."""
        prior = policy.own_hold(prior, self._lane, "unproven")
        held, below = policy.unproven_due(closing.history, held, self._lane)
        if below is None:
            return held, 0, ""
        unproven = await self._count_unseen(below)
        if not unproven:
            return held, 0, ""
        held = policy.unproven_hold(
            lane=self._lane,
            below=below,
            count=unproven,
            snapshot=await self._store.count_items(self._key),
            prior=prior,
            now=now,
        )
        await self._report_unproven(held, before)
        return held, unproven, policy.unproven_note(unproven)

    async def _recount_held(self, held: HeldDeletes | None) -> HeldDeletes | None:
        """This lane's hold, counting only the rows still below its mark; another lane's
        hold stays as it is."""
        if held is None or held.lane != self._lane:
            return held
        return policy.recounted(held, self._lane, await self._count_unseen(held.below))

    # --- proofs of absence ------------------------------------------------------------------

    async def _prove(
        self, progress: ListingPass, pass_id: int, missed: int | None
    ) -> tuple[tuple[str, ...], str, tuple[Bridge, ...]]:
        """The identities proven absent so far, with those the complete pass ``pass_id``
        proves now (see :func:`~watukuy.pipeline.deletes.proven_by`); a note for
        ``last_outcome`` when some rows were not examined; and the bridges the pass keeps.
        """
        kept = await self._still_missed(progress.proven, pass_id)
        known = set(kept)
        examine: list[str] = []
        streamed = 0
        async for batch in self._store.stream_unseen(self._key, pass_id, _IDENTITY_BATCH):
            streamed += len(batch)
            examine.extend(identity for identity in batch if identity not in known)
            if len(examine) >= policy.EVIDENCE_LIMIT:
                break
        examine = examine[: policy.EVIDENCE_LIMIT]
        note = policy.unexamined_note(missed, streamed, len(known), len(examine))
        found: list[str] = []
        crossed: set[str] = set()
        if examine:
            found, crossed = await self._evidence(
                pass_id, progress.pages - 1, examine, progress.bridges
            )
        bridges = progress.bridges if note else policy.kept_bridges(progress.bridges, crossed)
        return (*kept, *found)[:PROVEN_LIMIT], note, bridges

    async def _evidence(
        self, pass_id: int, final_read: int, missed: list[str], bridges: Sequence[Bridge]
    ) -> tuple[list[str], set[str]]:
        """Those of ``missed`` that the pass ``pass_id`` proves absent, and the bridges its
        walks went through. Every row is read once, 1,000 at a time."""
        walk = policy.Walk(pass_id, missed, bridges)
        await self._learn(walk, missed)
        walk.start()
        while walk.walking:
            await self._learn(walk, walk.frontier())
            walk.step()
        return walk.proven(final_read), walk.crossed

    async def _learn(self, walk: policy.Walk, identities: Sequence[str]) -> None:
        need = walk.unknown(identities)
        for start in range(0, len(need), _IDENTITY_BATCH):
            chunk = need[start : start + _IDENTITY_BATCH]
            walk.learn(chunk, await self._store.load_marks(self._key, chunk))

    async def _load_marks(self, identities: Sequence[str]) -> dict[str, ItemMark]:
        """The marks and links of those stored ``identities``, 1,000 at a time."""
        found: dict[str, ItemMark] = {}
        for start in range(0, len(identities), _IDENTITY_BATCH):
            chunk = identities[start : start + _IDENTITY_BATCH]
            found.update(await self._store.load_marks(self._key, chunk))
        return found

    async def _marks_below(self, identities: Sequence[str], below: int) -> dict[str, int]:
        """The seen marks of those stored ``identities`` whose mark is below ``below``."""
        found: dict[str, int] = {}
        for start in range(0, len(identities), _IDENTITY_BATCH):
            chunk = identities[start : start + _IDENTITY_BATCH]
            marks = await self._store.load_marks(self._key, chunk)
            found.update((i, m.seen) for i, m in marks.items() if m.seen < below)
        return found

    async def _still_missed(self, identities: Sequence[str], below: int) -> tuple[str, ...]:
        """``identities`` pruned of rows listed by a pass from ``below`` on, or deleted."""
        marks = await self._marks_below(identities, below)
        return tuple(identity for identity in identities if identity in marks)

    async def _count_unseen(self, below: int) -> int:
        count = 0
        async for batch in self._store.stream_unseen(self._key, below, _IDENTITY_BATCH):
            count += len(batch)
        return count

    # --- emitting deletes -------------------------------------------------------------------

    async def release_held(self, state: PollerState) -> tuple[PollerState, int]:
        """Emit the deletes an operator confirmed (``state.held_deletes``), then drop the
        hold. Rows seen again since they were held are no longer below its mark.

        Returns:
            The state saved, and how many ``deleted`` events went out.
        """
        held = state.held_deletes
        assert held is not None
        progress = state.listing.lanes.get(held.lane)
        # The newest complete pass of the lane that held them is the last to have missed them.
        newest = progress.clean[-1] if progress is not None and progress.clean else None
        state, emitted, bridges = await self._emit_deletes(state, held.below, proved_by=newest)
        now = self._clock.now()
        patch: StatePatch = {"held_deletes": None, "updated_at": now}
        if progress is not None:
            lanes = {**state.listing.lanes, held.lane: policy.released(progress, emitted, bridges)}
            patch["listing"] = dataclasses.replace(state.listing, lanes=lanes)
        await self._store.save_state(self._key, self._keeper.lease, patch)
        self._logger.info("emitted %d confirmed delete(s)", emitted)
        return apply_patch(state, patch), emitted

    async def _emit_deletes(
        self,
        state: PollerState,
        below: int,
        *,
        proved_by: int | None,
        only: set[str] | None = None,
    ) -> tuple[PollerState, int, tuple[Bridge, ...]]:
        """Emit ``deleted`` for every stored identity whose seen mark is below ``below``
        (and that is among ``only``, when given), one committed batch at a time (a run cut
        half-way resumes with the rest). Returns the state, the events emitted and the
        bridges of the rows deleted.

        Each event's ``cursor`` names the complete pass ``proved_by`` that confirmed it.
        """
        path = self._path
        cursor = None if proved_by is None else {"pass": proved_by}
        emitted = 0
        bridges: list[Bridge] = []
        verify = self._rules.verify
        # The walk pages by the last identity, so deleting what it already passed is safe.
        async for candidates in self._store.stream_unseen(self._key, below, _IDENTITY_BATCH):
            if only is not None:
                candidates = [identity for identity in candidates if identity in only]
                if not candidates:
                    continue
            chunk, present = candidates, list[str]()
            if verify is not None:
                chunk, present = await self._verify(verify, candidates)
            now = self._clock.now()
            sequence = state.sequence
            rows: list[OutboxRow] = []
            events: list[WrittenEvent] = []
            observed: Observed = [] if self._hooks.has("on_event") else None
            stored = await self._store.load_versions(self._key, chunk)
            for identity in chunk:
                row = stored.get(identity)
                if row is None:
                    continue
                sequence += 1
                event, outbox_row = self._deleted(row, sequence, now, observed, cursor)
                rows.append(outbox_row)
                events.append(event)
            patch: StatePatch = {"sequence": sequence, "updated_at": now}
            links: dict[str, ListingLink] = {}
            if self._rules.proves:
                links, spliced = await self._splice(chunk)
                bridges.extend(spliced)
            batch = CommitBatch(
                state_patch=patch,
                deletes=chunk,
                links=links,
                # Still there: seen now, by the newest pass, so no pass in progress
                # proposes it again.
                seen=present,
                seen_pass=state.listing.counter,
                events=rows,
                log=self._poller.log is not None,
                now=now,
            )
            await path.commit(batch, observed, len(chunk))
            state = apply_patch(state, patch)
            emitted += len(rows)
            if rows:
                await path.deliver(rows, WrittenPage(self._events.writer(now, cursor), events))
        return state, emitted, tuple(bridges)

    def _deleted(
        self, row: ItemRow, sequence: int, now: int, observed: Observed, cursor: Any
    ) -> tuple[WrittenEvent, OutboxRow]:
        """The ``deleted`` event of a stored row, and its outbox row (with the payload the
        row kept, when the poller retains payloads)."""
        events = self._events
        payload = events.load_payload(row.payload) if self._poller.retain_payload else None
        return events.event(
            type_="deleted",
            identity=row.identity,
            version=row.version if row.version is not None else row.hash,
            revision=row.revision + 1,
            data=payload,
            previous=payload,
            sequence=sequence,
            now=now,
            observed=observed,
            cursor=cursor,
        )

    async def _verify(
        self, verify: Callable[..., Any], candidates: list[str]
    ) -> tuple[list[str], list[str]]:
        """Split delete candidates into (gone, still present) by asking ``verify``."""
        ctx = self._context()
        gone: list[str] = []
        present: list[str] = []
        for identity in candidates:
            if ctx.cancelled:
                raise asyncio.CancelledError
            answer = verify(identity, ctx)
            if inspect.isawaitable(answer):
                answer = await answer
            (present if answer else gone).append(identity)
        if present:
            self._logger.info("verify kept %d delete candidate(s) the listing missed", len(present))
        return gone, present

    async def _splice(
        self, deleted: list[str]
    ) -> tuple[dict[str, ListingLink], tuple[Bridge, ...]]:
        """The links that close the gaps ``deleted`` leaves in the listing's chains, and the
        bridges of the deleted rows (see :func:`~watukuy.pipeline.deletes.splice`)."""
        if not deleted:
            return {}, ()
        spliced = policy.splice(deleted, await self._load_marks(deleted))
        current = await self._load_marks(spliced.neighbours())
        return spliced.links(current), spliced.bridges

    # --- reports ----------------------------------------------------------------------------

    async def _report_held(self, held: HeldDeletes) -> None:
        self._logger.warning(
            "mass-delete guard: holding %d delete(s) of a snapshot of %d (pass %d in a row); "
            "confirm or discard them with engine.deletes.confirm()/discard() or "
            "`watukuy deletes`",
            held.count,
            held.snapshot,
            held.passes,
            extra={"held_deletes": held.count, "snapshot": held.snapshot},
        )
        await self._hooks.on_deletes_held(
            count=held.count, snapshot=held.snapshot, passes=held.passes
        )

    async def _report_unproven(self, held: HeldDeletes, before: int) -> None:
        """The WARNING and the ``on_deletes_held`` hook of a hold of unproven deletes (the
        hook once, when the hold appears; the WARNING then and every 10th pass)."""
        if before and held.passes % 10:
            return
        self._logger.warning(
            "full listing: holding %d delete(s) that %d complete passes in a row missed "
            "without a proof or passes that agree (the listing keeps changing where they "
            "were); confirm or discard them with engine.deletes.confirm()/discard() or "
            "`watukuy deletes`, or give Deletes(verify=)",
            held.count,
            UNPROVEN_PASSES,
            extra={"held_deletes": held.count, "unproven": held.count},
        )
        if not before:
            await self._hooks.on_deletes_held(
                count=held.count, snapshot=held.snapshot, passes=held.passes
            )

    def _report_disagreement(self, disagreed: int, outcome: str) -> None:
        if disagreed == _DISAGREEMENT_WARNING or (disagreed and disagreed % 10 == 0):
            self._logger.warning(
                "full listing: %d pass(es) in a row disagreed with the one before (only "
                "deletes proven one by one go out meanwhile): %s",
                disagreed,
                outcome,
                extra={"disagreed": disagreed},
            )
        else:
            self._logger.info("full listing: %s", outcome)
