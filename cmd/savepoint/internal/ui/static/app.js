// savepoint ui: the little JavaScript the pages use. Everything works
// without it except live updates.
"use strict";
