// docrun prelude (TypeScript): the README's first dial. $SAVEPOINT_ADDR
// names a fresh daemon; after the block, the connection answers a call.
import { dial } from "@savepoint-dev/client";
// BLOCK
const { sessions } = await sp.raw.listSessions({ pageSize: 10 });
if (sessions.length !== 0) throw new Error(`a fresh daemon lists ${sessions.length} sessions`);
sp.close();
