package view

import (
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/storage"

	"github.com/cluster-mapper/cluster-mapper/pkg/cache"
	"github.com/cluster-mapper/cluster-mapper/pkg/contract"
)

// continuePrefix is the key prefix storage.EncodeContinue/DecodeContinue expect; cache keys are
// stored below it in continue tokens.
const continuePrefix = "/"

// predicate returns the filter a list or watch applies on top of the location: the request's
// namespace (empty for all), label selector and field selector (metadata.name and
// metadata.namespace, the fields every resource supports).
func predicate(namespace string, label labels.Selector, field fields.Selector) func(*cache.Object) bool {
	if label == nil {
		label = labels.Everything()
	}
	if field == nil {
		field = fields.Everything()
	}
	matchAll := label.Empty() && field.Empty()
	return func(o *cache.Object) bool {
		if namespace != "" && o.Namespace() != namespace {
			return false
		}
		if matchAll {
			return true
		}
		if !label.Empty() && !label.Matches(o.Labels()) {
			return false
		}
		return field.Empty() || field.Matches(o.Fields())
	}
}

// listPredicate builds the predicate of a list or watch request.
func listPredicate(namespace string, opts *metainternalversion.ListOptions) func(*cache.Object) bool {
	return predicate(namespace, opts.LabelSelector, opts.FieldSelector)
}

// decodeContinue reads a continue token written by encodeContinue: the key after which the
// next page starts and the snapshot resourceVersion of the first page. An unreadable token is a
// 400, as in kube-apiserver.
func decodeContinue(token string) (contract.Key, uint64, error) {
	key, rv, err := storage.DecodeContinue(token, continuePrefix)
	if err != nil {
		return "", 0, apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", contract.Truncate(err.Error(), maxQuoted)))
	}
	return contract.Key(strings.TrimPrefix(key, continuePrefix)), uint64(rv), nil
}

// encodeContinue writes the continue token for a page that ended at key, with the snapshot
// resourceVersion every page of the list is served at.
func encodeContinue(key contract.Key, rv uint64) (string, error) {
	return storage.EncodeContinue(continuePrefix+string(key), continuePrefix, int64(rv))
}
