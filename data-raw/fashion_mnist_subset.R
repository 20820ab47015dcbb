# Builds data/fashion_mnist_subset.rda: the first 50 test images of each Fashion-MNIST class,
# from the files of Debian's dataset-fashion-mnist package (apt-get install dataset-fashion-mnist).
# Run from the package root with localmean installed: Rscript data-raw/fashion_mnist_subset.R
library(localmean)
test <- fashion_mnist("test")
index <- sort(unlist(lapply(levels(test$label), function(k) which(test$label == k)[1:50])))
fashion_mnist_subset <- list(x = test$x[index, ], label = test$label[index], index = index,
                             image_dim = test$image_dim)
save(fashion_mnist_subset, file = "data/fashion_mnist_subset.rda", compress = "xz")
