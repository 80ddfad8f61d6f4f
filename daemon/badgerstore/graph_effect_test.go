package badgerstore

import (
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core/storetest"
)

func TestThreadEffectOutputBudget(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	storetest.ThreadEffectOutputBudget(t, s)
}
