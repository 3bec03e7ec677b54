package registry

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A table is written once: an empty name and a second entry of one name
// are refused, and so is any entry once the table has been read; it reads
// back by name, sorted.
func TestTableIsWrittenOnce(t *testing.T) {
	tb := New[int]("number")
	require.NoError(t, tb.Add("two", 2))
	require.NoError(t, tb.Add("one", 1))
	err := tb.Add("two", 22)
	require.Error(t, err)
	assert.Equal(t, `number "two" added twice`, err.Error())
	require.Error(t, tb.Add("", 0))

	assert.Equal(t, []int{1, 2}, tb.All(), "by name")
	v, ok := tb.Named("two")
	assert.True(t, ok)
	assert.Equal(t, 2, v)
	_, ok = tb.Named("three")
	assert.False(t, ok)

	err = tb.Add("three", 3)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "after the table was read")
	assert.Len(t, tb.All(), 2)
	assert.Panics(t, func() { tb.MustAdd("four", 4) })
}
